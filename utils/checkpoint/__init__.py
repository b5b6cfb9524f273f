"""Checkpoints: files, the training state they hold, where a run's weights come from, resume guards, RNG capture."""
