"""Every CUDA path of the framework trains on a real GPU: amp levels and dtypes, nccl, SyncBN, the
cuda prefetcher, channels_last, compile, fused optimizers, DataParallel, gradient checkpointing,
background checkpoints, the profiler's CUDA trace, FSDP2 and its resume, predict and export.

Each case is a real ``main.py`` run (1 epoch of digits) that must finish with its `test:` line. Run
with ``tests/gpu/run.sh`` on a GPU machine; without CUDA every test is skipped.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.gpu.runs import digits, launch, needs_cuda, run_folder

pytestmark = [needs_cuda, pytest.mark.cuda, pytest.mark.slow]

RESNET = "digits_resnet18.yaml"  # BatchNorm and cuDNN convolutions, 32x32 inputs

# id: (config, overrides)
SINGLE = {
    "O0": (RESNET, ["amp.opt_level=O0"]),
    "O1_fp16": (RESNET, ["amp.opt_level=O1", "amp.dtype=float16"]),
    "O1_bf16": (RESNET, ["amp.opt_level=O1", "amp.dtype=bfloat16"]),
    "O2_fp16": (RESNET, ["amp.opt_level=O2", "amp.dtype=float16"]),
    "O2_bf16": (RESNET, ["amp.opt_level=O2", "amp.dtype=bfloat16"]),
    "O3_fp16": (RESNET, ["amp.opt_level=O3", "amp.dtype=float16"]),
    "O3_bf16": (RESNET, ["amp.opt_level=O3", "amp.dtype=bfloat16"]),
    "prefetch_cuda": (RESNET, ["data.prefetch=cuda"]),
    "prefetch_thread": (RESNET, ["data.prefetch=thread"]),
    "channels_last_O1": (RESNET, ["model.channels_last=true", "amp.opt_level=O1"]),
    "sod_grad_checkpointing_O1": ("sod_shapes.yaml", ["model.grad_checkpointing=true", "amp.opt_level=O1"]),
    "video_O1": ("video_moving_shapes.yaml", ["amp.opt_level=O1"]),
    "fused_sgd": (RESNET, ["optim.impl=fused"]),
    "fused_adamw_O2": (RESNET, ["optim.name=adamw", "optim.lr=0.001", "optim.impl=fused", "amp.opt_level=O2"]),
    "dp": (RESNET, ["dist.mode=dp"]),
    "background_checkpoints": (RESNET, ["train.async_checkpoint=true", "train.checkpoint_every_steps=5"]),
    "compile": ("", ["train.compile=true"]),
    "ema_O2": (RESNET, ["train.ema={decay: 0.99}", "amp.opt_level=O2"]),
}

# id: (config, overrides) under torchrun --nproc_per_node=1 (nccl)
TORCHRUN = {
    "ddp_nccl": (RESNET, []),
    "sync_bn": (RESNET, ["model.sync_bn=true", "amp.opt_level=O1"]),
    "ddp_O2_bf16": (RESNET, ["amp.opt_level=O2", "amp.dtype=bfloat16"]),
}


@pytest.mark.parametrize("case", sorted(SINGLE))
def test_one_process_case_trains_on_the_gpu(tmp_path, case):
    config, extra = SINGLE[case]
    ran = launch(digits(tmp_path, case, "amp.backend=native", *extra, config=config))
    line = ran.test_line()
    assert "device cuda" in ran.out, ran.out[-3000:]
    values = [float(v) for v in re.findall(r"=([-+\w.]+)", line)]
    assert values and np.isfinite(values).all(), line


@pytest.mark.parametrize("case", sorted(TORCHRUN))
def test_torchrun_case_trains_over_nccl(tmp_path, case):
    config, extra = TORCHRUN[case]
    ran = launch(digits(tmp_path, case, "amp.backend=native", *extra, config=config), nproc=1)
    ran.test_line()
    # one process: no process group (DDP and nccl need two ranks, two GPUs here)
    assert "1 process(es) (launcher: torchrun)" in ran.out, ran.out[-3000:]


def test_two_ranks_sharing_one_gpu_train_or_say_why(tmp_path):
    """Two processes on one GPU: nccl refuses two ranks on one device, which is one error line naming the fix."""
    ran = launch(digits(tmp_path, "shared", config=RESNET), nproc=2, timeout=120)
    if ran.rc != 0:
        assert re.search(r"^(\[rank\d\] )?error: nccl needs one GPU per process", ran.out, re.M), ran.out[-4000:]
    else:
        ran.test_line()


def test_profiler_trace_holds_cuda_kernels(tmp_path):
    ran = launch(digits(tmp_path, "profile", "train.profile={wait: 1, warmup: 1, active: 3}", config=RESNET))
    ran.test_line()
    traces = list(run_folder(tmp_path, "profile").rglob("trace.json"))
    assert traces, ran.out[-3000:]
    events = json.loads(traces[0].read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels, sorted({e.get("cat") for e in events})


def test_fsdp_bf16_trains_and_resumes_on_the_gpu(tmp_path):
    settings = ["dist.mode=fsdp", "amp.opt_level=O2", "amp.dtype=bfloat16"]
    first = launch(digits(tmp_path, "fsdp", *settings, config=RESNET), nproc=1)
    first.test_line()
    finished = str(run_folder(tmp_path, "fsdp"))  # continued when named
    again = launch(["--resume", finished, *digits(tmp_path, "fsdp", *settings, epochs=2, config=RESNET)], nproc=1)
    again.test_line()
    assert "training state restored: epoch 1" in again.out, again.out[-3000:]


def test_test_predict_and_export_on_the_gpu(tmp_path):
    from PIL import Image

    trained = launch(digits(tmp_path, "apps", config=""))
    line = trained.test_line()
    best = run_folder(tmp_path, "apps") / "checkpoints" / "best.pt"
    tested = launch(["--mode", "test", "--checkpoint", str(best), "device=cuda"])
    assert tested.test_line() == line  # the checkpoint scores on the GPU what the run printed for it
    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(5):
        Image.fromarray(rng.integers(0, 255, (8, 8), dtype=np.uint8), mode="L").save(photos / f"{i}.png")
    predicted = launch(["--mode", "predict", "--checkpoint", str(best), "--input", str(photos), "device=cuda"])
    assert predicted.rc == 0 and "predict:" in predicted.out, predicted.out[-3000:]
    for fmt in ("onnx", "pt2", "safetensors"):
        exported = launch(["--mode", "export", "--checkpoint", str(best), "--format", fmt, "device=cuda"])
        assert exported.rc == 0 and re.search(r"^export: format=", exported.out, re.M), exported.out[-3000:]
