"""What the GPU runs found, kept on the CPU: nccl's refusal of two ranks on one GPU becomes one config
error naming the fix, and the kernel choice leaves a CPU run alone."""

from __future__ import annotations

import torch
import torch.distributed as dist

from utils.distributed.determinism import make_deterministic
from utils.distributed.process_group import shared_gpu_error
from utils.errors import ConfigError

# nccl 2.28's message, as two torchrun ranks on one H200 got it
DUPLICATE = (
    "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, invalid usage (run with "
    "NCCL_DEBUG=WARN for details), NCCL version 2.28.9\nLast error:\nDuplicate GPU detected : rank 1 and "
    "rank 0 both on CUDA device 60"
)


def test_two_ranks_on_one_gpu_is_a_config_error_naming_the_fix():
    err = shared_gpu_error(dist.DistBackendError(DUPLICATE), "2", 1)
    assert isinstance(err, ConfigError)
    assert "2 processes on this node share 1 GPU(s)" in str(err) and "--nproc_per_node=1" in str(err)


def test_other_backend_failures_stay_as_they_were():
    original = dist.DistBackendError("NCCL error: unhandled system error")
    assert shared_gpu_error(original, "2", 2) is original


def test_a_cpu_run_keeps_torchs_kernel_settings():
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic)
    assert make_deterministic(torch.device("cpu"), True) == ""
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic) == before
