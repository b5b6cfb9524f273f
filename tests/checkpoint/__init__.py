"""Checkpoint files, the training state, exact resume, restore order."""
