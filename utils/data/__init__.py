"""Data: datasets (``DATASETS`` registry), transforms, samplers and loaders."""

from utils.data.loader import build_dataset, build_eval_loader, build_train_loader, with_process_batch
from utils.data.samplers import SliceSampler

__all__ = ["build_dataset", "build_eval_loader", "build_train_loader", "with_process_batch", "SliceSampler"]
