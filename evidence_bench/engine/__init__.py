"""The engine being measured: ranking, feedback, query refinement and the search session."""
