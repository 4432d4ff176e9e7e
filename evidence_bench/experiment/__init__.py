"""Experiments: typed configs, simulated episodes, the runner and the run directory."""
