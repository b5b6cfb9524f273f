"""Deterministic GPU kernels: what makes a CUDA run repeat bit for bit, so that a resumed run equals an
uninterrupted one (the exact-resume promise) and two runs of one config agree.

cuDNN chooses convolution algorithms by speed, and some of them add partial sums with atomics, in an
order that changes from run to run; cuBLAS needs a fixed workspace for the same reason. On the CPU
the framework's kernels already repeat, and nothing is changed.
"""

from __future__ import annotations

import os

import torch


def make_deterministic(device: torch.device, enabled: bool) -> str:
    """Select deterministic CUDA kernels (``enabled``) or the fastest ones; the phrase for the start line."""
    if device.type != "cuda":
        return ""
    torch.backends.cudnn.benchmark = not enabled
    torch.backends.cudnn.deterministic = enabled
    if enabled:
        # read when cuBLAS makes its handle (the first matrix product): before any, here
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        # warn_only: an operation without a deterministic CUDA kernel warns by name instead of stopping the run
        torch.use_deterministic_algorithms(True, warn_only=True)
        return "deterministic kernels"
    torch.use_deterministic_algorithms(False)
    return "fastest kernels (deterministic=false: runs and resumes may differ in the last bits)"
