"""Network building: gradient checkpointing, lazy modules, parameter and MAC counts."""
