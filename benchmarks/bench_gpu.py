"""The GPU figures, on one CUDA device (every ratio measured in this run, interleaved rounds, medians).

- amp: resnet50 (the framework's classifier) at 224x224, batch 64, synthetic data, AdamW: step time
  of O1 and O2 (fp16 and bf16) against O0; with apex's O1 and O2 where an apex build with
  ``apex.amp`` imports, their step time, peak memory and loss curve against the native backend.
- memory: MINet on resnet50 at 320x320, batch 16: peak GPU memory of a training step (weights,
  gradients, optimizer state and activations) with gradient checkpointing, and at O1, against plain.
- framework: the Trainer's step against a hand-written loop at O0 (samples/s), and the weights after
  the same steps (identical under cuDNN's deterministic algorithms).
- syncs: host-device synchronizations per training step of the Trainer, counted by
  ``torch.cuda.set_sync_debug_mode``, with the loss read every 10 steps and never.

    python benchmarks/bench_gpu.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from pathlib import Path
from typing import Callable, List

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_amp import Setup, classifier  # noqa: E402
from benchmarks.common import framework_epoch, hand_loop, interleaved, max_abs_diff, ratios, row  # noqa: E402
from benchmarks.gpu_measures import count_syncs, peak_bytes, seconds_per_step  # noqa: E402
from utils.amp.policy import apex_amp_available  # noqa: E402
from utils.config.schema import ScheduleConfig  # noqa: E402
from utils.distributed.determinism import make_deterministic  # noqa: E402
from utils.optim.schedules import build_scheduler, lr_factor_fn  # noqa: E402
from utils.registry import NETWORKS  # noqa: E402

CUDA = torch.device("cuda", 0)
NAME = "gpu"


def _batch(n: int, size: int, num_classes: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, size, size, generator=g).to(CUDA)
    return x, torch.randint(0, num_classes, (n,), generator=g).to(CUDA)


NATIVE = {"O0": ("O0", "float16"), "O1 fp16": ("O1", "float16"), "O2 fp16": ("O2", "float16")}
NATIVE.update({"O1 bf16": ("O1", "bfloat16"), "O2 bf16": ("O2", "bfloat16")})
APEX = {"apex O2": "O2", "apex O1": "O1"}  # O2 first: apex O1 patches torch's functions for the rest of the process


def amp_rows(quick: bool, batch: int = 64, channels_last: bool = False) -> List[dict]:
    batch, size, steps, rounds = (8, 64, 3, 2) if quick else (batch, 224, 15, 5)
    x, y = _batch(batch, size, 1000)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    curve_steps = 3 if quick else 20
    layout = torch.channels_last if channels_last else torch.contiguous_format
    setups = {
        name: Setup(level, classifier("resnet50", 1000).to(memory_format=layout), CUDA, dtype, "native")
        for name, (level, dtype) in NATIVE.items()
    }
    peaks = {name: peak_bytes(lambda s=s: s.step(x, y)) for name, s in setups.items()}
    cases = {name: seconds_per_step(lambda s=s: s.step(x, y), steps) for name, s in setups.items()}
    cases["O0 no TF32"] = _without_tf32(cases["O0"])  # torch runs fp32 convolutions in TF32 on Ampere and later
    times = interleaved(cases, rounds)
    del setups
    torch.cuda.empty_cache()
    curves = {
        name: _loss_curve(
            Setup(NATIVE[name][0], classifier("resnet50", 1000), CUDA, "float16", "native"), x, y, curve_steps
        )
        for name in ("O1 fp16", "O2 fp16")
    }
    for name, level in APEX.items() if apex_amp_available() else ():
        setup = Setup(level, classifier("resnet50", 1000), CUDA, "float16", "apex")
        peaks[name] = peak_bytes(lambda s=setup: s.step(x, y))
        times[name] = [seconds_per_step(lambda s=setup: s.step(x, y), steps)() for _ in range(rounds)]
        curves[name] = _loss_curve(
            Setup(level, classifier("resnet50", 1000), CUDA, "float16", "apex"), x, y, curve_steps
        )
        del setup
        torch.cuda.empty_cache()
    model = f"resnet50 {size}x{size} batch {batch}{', channels_last' if channels_last else ''}, AdamW"
    rows = []
    for name in (n for n in times if not n.startswith("O0")):
        rows.append(row("gpu amp", f"speed-up {name} vs O0 without TF32", ratios(times["O0 no TF32"], times[name])))
        note = f"{model}; {name} {statistics.median(times[name]) * 1e3:.1f} ms, O0 {statistics.median(times['O0']) * 1e3:.1f} ms"
        goal, check = ("", None) if "apex" in name else (">= 2.0", lambda v: v >= 2.0)
        rows.append(row("gpu amp", f"speed-up {name} vs O0", ratios(times["O0"], times[name]), goal, check, note))
        rows.append(
            row(
                "gpu amp",
                f"peak memory {name} / O0",
                [peaks[name] / peaks["O0"]],
                note=f"O0 {peaks['O0'] / 2**30:.2f} GiB",
            )
        )
    for name in (n for n in curves if n.startswith("apex")):
        native = curves[f"{name.split()[1]} fp16"]
        gap = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(curves[name], native))
        note = f"{curve_steps} steps, same data; native {native[0]:.3f} -> {native[-1]:.3f}, apex {curves[name][0]:.3f} -> {curves[name][-1]:.3f}"
        rows.append(row("gpu amp", f"{name}: largest relative loss gap vs native", [gap], note=note))
    return rows


def _without_tf32(measure: Callable[[], float]) -> Callable[[], float]:
    def strict() -> float:
        torch.backends.cudnn.allow_tf32 = False
        try:
            return measure()
        finally:
            torch.backends.cudnn.allow_tf32 = True

    return strict


def _loss_curve(setup: Setup, x: torch.Tensor, y: torch.Tensor, steps: int) -> List[float]:
    """The loss of each of ``steps`` training steps on the same batch."""
    losses = []
    for _ in range(steps):
        loss = setup.loss(x, y)
        losses.append(float(loss.detach()))
        setup.amp.backward(loss)
        setup.amp.step(setup.optimizer)
        setup.amp.zero_grad(setup.optimizer)
    return losses


def memory_rows(quick: bool) -> List[dict]:
    batch, size = (2, 64) if quick else (16, 320)
    x = torch.randn(batch, 3, size, size, device=CUDA)
    mask = (torch.rand(batch, 1, size, size, device=CUDA) > 0.5).float()
    peaks = {}
    for name, level, ckpt in (("plain", "O0", False), ("grad checkpointing", "O0", True), ("amp O1", "O1", False)):
        torch.manual_seed(0)
        net = NETWORKS.build("minet", backbone="resnet50")
        net.set_grad_checkpointing(ckpt)
        setup = Setup(level, net, CUDA, "float16", "native")

        def step(s: Setup = setup) -> None:
            with s.amp.autocast():
                loss = F.binary_cross_entropy_with_logits(s.model(x).float(), mask)
            s.amp.backward(loss)
            s.amp.step(s.optimizer)
            s.amp.zero_grad(s.optimizer)

        peaks[name] = peak_bytes(step)
        del setup, net
        torch.cuda.empty_cache()
    note = f"MINet resnet50 {size}x{size} batch {batch}, AdamW; plain {peaks['plain'] / 2**30:.2f} GiB"
    return [
        row(
            "gpu memory",
            "peak with grad checkpointing / plain",
            [peaks["grad checkpointing"] / peaks["plain"]],
            "<= 0.50",
            lambda v: v <= 0.5,
            note,
        ),
        row(
            "gpu memory",
            "peak at amp O1 fp16 / plain",
            [peaks["amp O1"] / peaks["plain"]],
            "<= 0.61",
            lambda v: v <= 0.61,
            note,
        ),
    ]


def framework_rows(quick: bool) -> List[dict]:
    batch, size, steps, rounds = (8, 64, 4, 2) if quick else (64, 224, 20, 5)
    data = [_batch(batch, size, 1000, seed) for seed in range(steps)]
    schedule = ScheduleConfig(name="cosine", warmup_epochs=0.0)
    init = classifier("resnet50", 1000).to(CUDA)

    def optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def framework(log_every: int = 10) -> torch.nn.Module:
        model = copy.deepcopy(init)
        opt = optimizer(model)
        framework_epoch(
            model, data, opt, build_scheduler(opt, schedule, steps, steps), device=CUDA, log_every=log_every
        )
        return model

    def plain() -> torch.nn.Module:
        model = copy.deepcopy(init)
        opt = optimizer(model)
        hand_loop(model, data, opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_factor_fn(schedule, steps, steps)))
        return model

    def timed(fn: Callable[[], object]) -> Callable[[], float]:
        return seconds_per_step(fn, 1)

    def deterministic() -> torch.nn.Module:
        make_deterministic(CUDA, True)
        try:
            return framework()
        finally:
            torch.use_deterministic_algorithms(False)
            torch.backends.cudnn.deterministic = False

    cases = {"framework": timed(framework), "plain": timed(plain), "deterministic": timed(deterministic)}
    times = interleaved(cases, rounds)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    diff = max_abs_diff(framework().state_dict(), plain().state_dict())
    torch.backends.cudnn.deterministic = False
    syncs = {every: count_syncs(lambda e=every: framework(e)) / steps for every in (10, 10**6)}
    note = f"resnet50 {size}x{size} batch {batch}, SGD, {steps} steps; plain {statistics.median(times['plain']) / steps * 1e3:.1f} ms/step"
    return [
        row(
            "gpu framework",
            "samples/s framework / hand-written loop",
            ratios(times["plain"], times["framework"]),
            ">= 0.97",
            lambda v: v >= 0.97,
            note,
        ),
        row(
            "gpu framework",
            "step time, deterministic kernels / torch's default",
            ratios(times["deterministic"], times["framework"]),
            note="the framework's default (deterministic=true) against torch's",
        ),
        row(
            "gpu framework",
            "largest weight difference after the same steps (O0)",
            [diff],
            "0",
            lambda v: v == 0,
            "cuDNN deterministic",
            "{:.3g}",
        ),
        row(
            "gpu framework",
            "device syncs per step, loss read every 10 steps",
            [syncs[10]],
            "<= 0.1 between log steps",
            None,
            f"{steps} steps, set-up and end included",
        ),
        row(
            "gpu framework",
            "device syncs per step, loss never read mid-epoch",
            [syncs[10**6]],
            "<= 0.1",
            lambda v: v <= 0.1,
            f"{steps} steps, set-up and end included",
        ),
    ]


def run(quick: bool = False, show: Callable[[dict], None] = lambda r: None, amp_only: tuple = ()) -> List[dict]:
    """Every row; each shown as soon as it is measured (a later part that fails keeps the earlier ones).
    ``amp_only``: (batch, channels_last) to measure the amp rows alone at that batch and layout."""
    if not torch.cuda.is_available():
        return []
    parts = [lambda q: amp_rows(q, *amp_only)] if amp_only else [framework_rows, memory_rows, amp_rows]
    rows: List[dict] = []
    for part in parts:
        for r in part(quick):
            show(r)
            rows.append(r)
    return rows


def _show(r: dict) -> None:
    print(
        f"{r['measure']:<58} {r['value']:>8}  goal {r['goal'] or '-':<10} ok={r['ok']}  [{r['spread']}]  {r['note']}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small batches and inputs (a smoke run)")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument("--amp-batch", type=int, default=0, help="only the amp rows, at this batch size")
    parser.add_argument(
        "--channels-last", action="store_true", help="with --amp-batch: channels_last inputs and weights"
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: bench_gpu needs a CUDA device")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    rows = run(args.quick, _show, (args.amp_batch, args.channels_last) if args.amp_batch else ())
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
