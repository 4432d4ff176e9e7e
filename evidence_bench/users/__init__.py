"""Simulated users: who examines the displayed results and how they mark them."""
