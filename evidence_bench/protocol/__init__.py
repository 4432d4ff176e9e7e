"""The evaluation protocol: one episode's rounds, its stages and controls, and its modes."""
