"""Data: datasets (``DATASETS`` registry), transforms, samplers and loaders."""

from utils.data.loader import build_dataset, build_eval_loader, build_train_loader, per_process
from utils.data.samplers import ShardSampler

__all__ = ["build_dataset", "build_eval_loader", "build_train_loader", "per_process", "ShardSampler"]
