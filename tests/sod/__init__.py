"""Salient object detection: data, losses, metrics, training."""
