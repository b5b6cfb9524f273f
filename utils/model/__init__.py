"""Building networks and their objective: registry lookup, gradient checkpointing, parameter and FLOP counts."""
