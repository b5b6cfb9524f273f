"""The one check for a setting that needs a GPU the running process does not have.

The config cannot know it (``device: auto`` resolves on the machine that runs), so
every such setting (``device=cuda``, ``data.prefetch=cuda``, ``amp.backend=apex``, a
CUDA-only backend) asks here, and the messages agree.
"""

from __future__ import annotations

import torch

from utils.errors import ConfigError


def need_cuda(setting: str, device: torch.device, fix: str) -> None:
    """ConfigError naming ``setting`` and ``fix`` unless ``device`` is a CUDA device this process can use."""
    if not torch.cuda.is_available():
        raise ConfigError(f"{setting} needs a CUDA device, but CUDA is not available here; {fix}")
    if device.type != "cuda":
        raise ConfigError(f"{setting} needs a CUDA device, but the run uses {device}; {fix}")
