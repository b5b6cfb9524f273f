"""``train.compile``: compile time, and step time compiled vs eager, on this machine's CPU.

The framework's classifier (small_cnn, as in row 1) and resnet18 at 64x64, one
training step = forward, loss, backward, SGD step. Measured in a fresh process
with an empty inductor cache, so the compile time is what a first run pays:
the first compiled step minus an eager step. Then compiled and eager steps
alternate. Reported as measured: there is no CPU goal; GPUs (kernel fusion,
CUDA graphs with mode=reduce-overhead) are where compiling pays.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import ratios, row  # noqa: E402

CASES = {
    "small_cnn": ({"backbone": "small_cnn", "backbone_args": {"widths": [16, 32, 64]}}, (1, 16, 16), 32),
    "resnet18": ({"backbone": "resnet18"}, (3, 64, 64), 16),
}


def _stepper(model, x, y) -> Callable[[], float]:
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()

    def step() -> float:
        start = time.perf_counter()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    return step


def child(name: str, rounds: int) -> Dict[str, object]:
    """In a fresh process: compile time and per-round step times of ``name``."""
    import torch

    from utils.config.rules import COMPILE_DEFAULTS
    from utils.model.compile import compile_model
    from utils.registry import NETWORKS

    torch.set_num_threads(1)
    args, shape, batch = CASES[name]
    torch.manual_seed(0)
    eager = NETWORKS.build("classifier", num_classes=10, **args)
    compiled = compile_model(copy.deepcopy(eager), dict(COMPILE_DEFAULTS))
    x, y = torch.randn(batch, *shape), torch.randint(0, 10, (batch,))
    eager_step, compiled_step = _stepper(eager, x, y), _stepper(compiled, x, y)
    eager_step()
    first = compiled_step()
    warm_eager = min(eager_step() for _ in range(2))
    compiled_step()  # a second call can still settle guards
    times: Dict[str, List[float]] = {"eager": [], "compiled": []}
    for r in range(rounds):
        for case in ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager"):
            times[case].append((eager_step if case == "eager" else compiled_step)())
    return {"compile_s": first - warm_eager, "times": times, "batch": batch}


def _run_child(name: str, rounds: int) -> Dict[str, object]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", TORCHINDUCTOR_CACHE_DIR=cache)
        proc = subprocess.run(
            [sys.executable, __file__, name, str(rounds)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> List[dict]:
    rows = []
    for name in ("small_cnn",) if quick else tuple(CASES):
        out = _run_child(name, 3 if quick else 15)
        times = out["times"]
        eager_ms = sorted(times["eager"])[len(times["eager"]) // 2] * 1e3
        rows.append(
            row(
                "9 torch.compile",
                f"compile time (s), {name}",
                [out["compile_s"]],
                "",
                None,
                "first compiled step minus an eager step, empty inductor cache",
                fmt="{:.1f}",
            )
        )
        rows.append(
            row(
                "9 torch.compile",
                f"step time compiled / eager, {name}",
                ratios(times["compiled"], times["eager"]),
                "",
                None,
                f"CPU, batch {out['batch']}, mode=default, inductor; eager step {eager_ms:.1f} ms; no CPU goal (GPUs are where it pays)",
            )
        )
    return rows


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], int(sys.argv[2]))))
