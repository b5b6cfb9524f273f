"""MINet's memory table, counted exactly on any device: the bytes a training step holds, per configuration.

The seed MINet publishes one table of GPU memory for MINet-R (resnet50, 320x320, batch 16): plain 9009 MiB,
gradient checkpointing 4501, amp 5527, amp with checkpointing 3385, and the same on two GPUs. This
benchmark builds the network, optimizer (AdamW), loss and amp level the way a run does (the config file
through ``load_config``, ``build_network``, ``build_optimizer``, ``build_criterion``, ``Amp``) and counts,
per configuration:

- saved: the bytes autograd keeps for backward at the end of a forward and loss (``saved_tensors_hooks``,
  each storage once, the parameters left to "weights"); with checkpointing the recomputation in backward
  is not part of it (the count stops with the forward). The saving module is found by module hooks.
- weights, gradients and optimizer state (AdamW's two moments; at O2 the fp32 master weights too), the
  bytes of the tensors themselves after one real step (at a small input: they do not depend on the batch).

The sum is set against plain's, beside the seed's ratio. Activations grow with the batch alone (one image's
worth per sample), so the saved bytes are counted at 1, 2 and 4 images and extrapolated to the batch after
the three counts are checked to lie on one line; fp32 plain and checkpointing are also counted at the full
batch itself (bf16 is emulated on a CPU without AVX-512 and slow). Two ranks: each process counts as one
process at half the batch (DDP's buckets are the gradients themselves, ``dist.gradient_as_bucket_view``).
On CUDA (``--cuda``) it also reads ``torch.cuda.max_memory_allocated``/``max_memory_reserved`` of real steps.

    python benchmarks/bench_memory.py [--quick] [--config configs/minet_resnet50_duts.yaml] [--batch 16] [--cuda]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import row  # noqa: E402
from benchmarks.run import markdown_table  # noqa: E402

MIB = 2**20
MINET = "configs/minet_resnet50_duts.yaml"
# the seed's runs: no local weights file, AdamW (the seed's table), the batch per GPU
MINET_OVERRIDES = ["model.args.backbone_args.pretrained=", "optim.name=adamw", "optim.lr=0.001"]
SMALL_BATCHES = (1, 2, 4)  # counted, then extrapolated once shown to lie on one line
BENCHMARK = "26 memory"
QUICK_NET = [
    "model.args.backbone=small_cnn",
    "model.args.backbone_args={widths: [8, 16, 16]}",
]  # the suite's quick form
QUICK_SIZE = 64


@dataclass(frozen=True)
class Case:
    """One row of the table: amp level, checkpointing, processes, and the seed's MiB per GPU (none: not in it)."""

    name: str
    level: str
    checkpointing: bool
    ranks: int
    seed: Tuple[int, ...]


CASES = (
    Case("plain", "O0", False, 1, (9009,)),
    Case("checkpointing", "O0", True, 1, (4501,)),
    Case("amp O1", "O1", False, 1, (5527,)),
    Case("amp O2", "O2", False, 1, ()),
    Case("amp O1 + checkpointing", "O1", True, 1, (3385,)),
    Case("amp O2 + checkpointing", "O2", True, 1, ()),
    Case("2 ranks plain", "O0", False, 2, (5733, 5733)),
    Case("2 ranks checkpointing", "O0", True, 2, (3335, 2863)),
    Case("2 ranks amp O1", "O1", False, 2, (3409, 3325)),
    Case("2 ranks amp O1 + checkpointing", "O1", True, 2, (2107, 2215)),
)


class Run:
    """One configuration built as ``main.py`` builds it: network, optimizer, criterion, amp."""

    def __init__(self, config: Optional[str], overrides: Sequence[str], device: torch.device) -> None:
        from utils.amp import Amp
        from utils.config.load import load_config
        from utils.model.build import build_network
        from utils.model.criterion import build_criterion
        from utils.optim.optimizers import build_optimizer

        cfg = load_config(config, list(overrides))
        torch.manual_seed(0)
        model = build_network(cfg.model).to(device)
        optimizer = build_optimizer(model, cfg.optim)
        self.amp = Amp(cfg.amp, device)
        self.model, self.optimizer = self.amp.initialize(model, optimizer)
        self.model.train()
        self.criterion = build_criterion(cfg.loss)
        self.input_size = list(cfg.model.input_size)
        self.device = device
        self.dtype = str(self.amp.policy.dtype).replace("torch.", "")
        self.out_shape: Optional[List[int]] = None

    def batch(self, n: int, size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """``n`` random inputs (``size`` x ``size`` where given) and targets of the network's kind."""
        g = torch.Generator().manual_seed(n)
        shape = self.input_size if size is None else self.input_size[:-2] + [size, size]
        x = torch.randn(n, *shape, generator=g)
        if self.out_shape is None:
            self.model.eval()  # one image through BatchNorm: running statistics, not the batch's
            with torch.no_grad():
                self.out_shape = list(self.model(x[:1].to(self.device)).shape[1:])
            self.model.train()
        if len(self.out_shape) == 3:  # [1, H, W]: a mask, as the saliency networks predict
            y = (torch.rand(n, *shape[-2:], generator=g) > 0.5).float()[:, None]
        else:
            y = torch.randint(0, self.out_shape[0], (n,), generator=g)
        return x.to(self.device), y.to(self.device)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.amp.autocast():  # the loss too, as the Trainer's step computes it
            return self.criterion(self.model(x), y)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, int]:
        """One real step; the bytes of weights, gradients (the larger of after backward and after the step)
        and optimizer state it leaves."""
        self.amp.backward(self.loss(x, y))
        after_backward = _grad_bytes(self.model.parameters())
        self.amp.step(self.optimizer)
        grads = max(after_backward, _grad_bytes(_optimizer_params(self.optimizer)))
        model_params = set(self.model.parameters())
        weights = _storage_bytes(list(self.model.parameters()) + list(self.model.buffers()))
        masters = [p for p in _optimizer_params(self.optimizer) if p not in model_params]
        moments = [t for s in self.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        state = _storage_bytes(masters + moments)
        self.amp.zero_grad(self.optimizer)
        return {"weights": weights, "gradients": grads, "optimizer": state}


def _optimizer_params(optimizer: torch.optim.Optimizer) -> List[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _grad_bytes(params) -> int:
    return _storage_bytes([p.grad for p in params if p.grad is not None])


def _storage_bytes(tensors: Sequence[torch.Tensor]) -> int:
    storages = {}
    for t in tensors:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def _owner(name: str) -> str:
    """A module's name cut after its first index, at most 3 parts: backbone.stages.2, sims.0, head.0, aim.levels.1."""
    parts = name.split(".")
    for i, part in enumerate(parts[:3]):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    return ".".join(parts[:3]) or "(network)"


class SavedCounter:
    """Counts the storages autograd saves during one forward, once each, by the module whose forward saved them.

    The saved tensors are not kept (the hook returns their size), so a count at a large batch needs no more
    memory than inference; a storage seen again is the same one only while it is still alive (its address
    may be reused once freed). Parameters are left out (they are the weights).
    """

    def __init__(self, model: nn.Module) -> None:
        self.names = {id(m): _owner(name) for name, m in model.named_modules()}
        self.params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.stack: List[str] = []
        self.seen: Dict[int, StorageWeakRef] = {}
        self.by_module: Dict[str, int] = {}

    def _pre(self, module: nn.Module, args) -> None:
        self.stack.append(self.names.get(id(module), "loss"))

    def _post(self, module: nn.Module, args, output) -> None:
        self.stack.pop()

    def _pack(self, t: torch.Tensor) -> int:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        known = self.seen.get(ptr)
        if ptr in self.params or (known is not None and not known.expired()):
            return 0
        self.seen[ptr] = StorageWeakRef(storage)
        owner = self.stack[-1] if self.stack else "loss"
        self.by_module[owner] = self.by_module.get(owner, 0) + storage.nbytes()
        return storage.nbytes()

    def count(self, run: Run, x: torch.Tensor, y: torch.Tensor) -> Dict[str, int]:
        """Saved bytes by module of ``run.loss(x, y)`` (the loss is dropped, nothing is backpropagated)."""
        from torch.nn.modules import module as module_hooks

        self.seen, self.by_module = {}, {}
        pre = module_hooks.register_module_forward_pre_hook(self._pre)
        post = module_hooks.register_module_forward_hook(self._post)
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda size: None):
                loss = run.loss(x, y)
            del loss
        finally:
            pre.remove()
            post.remove()
        return dict(self.by_module)


class SavedLine:
    """One configuration's saved bytes by module as a line over the batch: counted at 1, 2 and 4 images
    (refused unless the three lie on one line), and at ``full`` images too where given (the line is checked
    against it, and that count is the one given for that batch)."""

    def __init__(self, run: Run, size: Optional[int], full: Optional[int]) -> None:
        counter = SavedCounter(run.model)
        counts = {b: counter.count(run, *run.batch(b, size)) for b in SMALL_BATCHES}
        totals = [sum(counts[b].values()) for b in SMALL_BATCHES]
        if totals[2] - totals[1] != 2 * (totals[1] - totals[0]):
            raise RuntimeError(f"saved bytes at batches {SMALL_BATCHES} do not lie on one line: {totals}")
        modules = set().union(*counts.values())
        self.one = {m: counts[1].get(m, 0) for m in modules}
        self.per_image = {m: counts[2].get(m, 0) - counts[1].get(m, 0) for m in modules}
        self.full = full
        self.counted = counter.count(run, *run.batch(full, size)) if full else {}
        self.off = sum(self.counted.values()) - sum(self.line(full).values()) if full else 0

    def line(self, batch: int) -> Dict[str, int]:
        return {m: self.one[m] + (batch - 1) * self.per_image[m] for m in self.one}

    def at(self, batch: int) -> Tuple[Dict[str, int], str]:
        """Bytes by module at ``batch``, and how they were found."""
        if batch == self.full:
            return self.counted, f"counted at batch {batch}; the line from 1, 2, 4 images is {self.off:+d} bytes off"
        return self.line(batch), f"the line from batches {', '.join(map(str, SMALL_BATCHES))}"


def measure(config: Optional[str], overrides: Sequence[str], batch: int, quick: bool) -> List[dict]:
    """Every case's bytes: saved, weights, gradients, optimizer, total, and the saved bytes by module. Each amp level
    and checkpointing pair is built and counted once; its two-rank case reads the same line at half the batch."""
    lines: Dict[Tuple[str, bool], Tuple[Run, Dict[str, int], SavedLine]] = {}
    results = []
    for case in CASES:
        key = (case.level, case.checkpointing)
        if key not in lines:
            extra = [f"amp.opt_level={case.level}", f"model.grad_checkpointing={str(case.checkpointing).lower()}"]
            run = Run(config, list(overrides) + extra, torch.device("cpu"))
            state = run.step(*run.batch(2, min(64, run.input_size[-1])))
            size = min(QUICK_SIZE, run.input_size[-1]) if quick else None
            full = batch if not quick and case.level == "O0" else None  # fp32 is fast enough to count at the batch
            lines[key] = (run, state, SavedLine(run, size, full))
        run, state, line = lines[key]
        by_module, how = line.at(batch // case.ranks)
        saved = sum(by_module.values())
        total = saved + sum(state.values())
        results.append(
            {"case": case, "dtype": run.dtype, "saved": saved, **state, "total": total, "by_module": by_module}
        )
        print(
            f"  {case.name}: saved {saved / MIB:.0f} MiB ({how}), state {sum(state.values()) / MIB:.0f} MiB",
            file=sys.stderr,
            flush=True,
        )
    return results


def _seed_ratio(case: Case) -> Optional[float]:
    return max(case.seed) / CASES[0].seed[0] if case.seed else None


def _unit(results: List[dict]) -> Tuple[int, str]:
    """MiB, or KiB where plain's total is under 100 MiB (the default experiment)."""
    return (MIB, "MiB") if results[0]["total"] >= 100 * MIB else (2**10, "KiB")


def table(results: List[dict], title: str, seed: bool) -> str:
    """Our bytes per case and their ratio to plain (two ranks: per process), the seed's figures beside where ``seed``."""
    plain = results[0]["total"]
    unit, name = _unit(results)
    lines = [
        f"{title}",
        "",
        "| configuration |"
        + (" seed MiB per GPU (/ plain) |" if seed else "")
        + f" saved | weights | gradients | optimizer | total {name} | / plain |",
        "|---|" + ("---|" if seed else "") + "---|---|---|---|---|---|",
    ]
    for r in results:
        case = r["case"]
        figures = " + ".join(map(str, case.seed)) + f" ({_seed_ratio(case):.2f})" if case.seed else "-"
        cells = [f"{r[k] / unit:.0f}" for k in ("saved", "weights", "gradients", "optimizer", "total")]
        label = case.name + (f" ({r['dtype']})" if case.level != "O0" else "")
        lines.append(
            f"| {label} |" + (f" {figures} |" if seed else "") + f" {' | '.join(cells)} | {r['total'] / plain:.2f} |"
        )
    return "\n".join(lines)


def what_stays(result: dict, unit: int = MIB, top: int = 5) -> str:
    """The modules that save the most for backward, with their bytes in ``unit``."""
    ranked = sorted(result["by_module"].items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name} {value / unit:.0f}" for name, value in ranked)


def rows_of(results: List[dict], what: str, goals: bool) -> List[dict]:
    """A table row per case: total / plain, against the seed's ratio as the goal where ``goals`` (MINet's table)."""
    plain = results[0]
    rows = []
    for r in results[1:]:
        seed = _seed_ratio(r["case"]) if goals else None
        unit, name = _unit(results)
        saved = f"saved {r['saved'] / unit:.0f} {name} ({what_stays(r, unit, 3)})"
        note = f"{what}; {saved}; plain {plain['total'] / unit:.0f} {name}"
        rows.append(
            row(
                BENCHMARK,
                f"saved + state, {r['case'].name} / plain",
                [r["total"] / plain["total"]],
                goal=f"<= {seed:.2f} (seed)" if seed else "",
                check=(lambda v, s=seed: v <= s + 0.005) if seed else None,
                note=note,
            )
        )
    return rows


def cuda_peaks(config: str, overrides: Sequence[str], batch: int) -> List[str]:
    """Peak allocated and reserved MiB of one real step per one-process case, on CUDA (when there is one)."""
    lines = []
    for case in CASES:
        if case.ranks != 1:
            continue
        extra = [f"amp.opt_level={case.level}", f"model.grad_checkpointing={str(case.checkpointing).lower()}"]
        run = Run(config, list(overrides) + extra, torch.device("cuda"))
        run.step(*run.batch(batch))  # the optimizer state exists from here on, as in training
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        run.step(*run.batch(batch))
        torch.cuda.synchronize()
        allocated, reserved = torch.cuda.max_memory_allocated() / MIB, torch.cuda.max_memory_reserved() / MIB
        lines.append(f"| {case.name} ({run.dtype}) | {allocated:.0f} | {reserved:.0f} |")
        del run
        torch.cuda.empty_cache()
    return ["| configuration | peak allocated MiB | peak reserved MiB |", "|---|---|---|", *lines]


def run(quick: bool = False) -> List[dict]:
    """MINet resnet50 (320x320, batch 16; quick: on small_cnn, 96x96, batch 4) and the default experiment (batch 64)."""
    minet = measure(MINET, MINET_OVERRIDES + (QUICK_NET if quick else []), 4 if quick else 16, quick)
    default = measure(None, ["optim.name=adamw"], 64, quick)
    what = f"MINet small_cnn {QUICK_SIZE}x{QUICK_SIZE} batch 4" if quick else "MINet resnet50 320x320 batch 16"
    return rows_of(minet, what, goals=True) + rows_of(
        default, "default experiment (digits, small_cnn) batch 64", goals=False
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SIZE}x{QUICK_SIZE} inputs (a smoke run)")
    parser.add_argument("--config", default=MINET, help="the experiment: a config file or 'default' (MINet-R on DUTS)")
    parser.add_argument("--batch", type=int, default=16, help="the batch of one process")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--cuda", action="store_true", help="also read CUDA's peak memory of real steps")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = None if args.config == "default" else args.config
    overrides = MINET_OVERRIDES if args.config == MINET else ["optim.name=adamw"]
    results = measure(config, overrides, args.batch, args.quick)
    minet = args.config == MINET
    unit, name = _unit(results)
    print(table(results, f"{args.config}, batch {args.batch} per process, AdamW; {name} counted on the CPU", minet))
    print()
    for r in results[1:]:
        seed = _seed_ratio(r["case"]) if minet else None
        ratio = r["total"] / results[0]["total"]
        if seed is not None and ratio > seed + 0.005:
            print(f"{r['case'].name}: {ratio:.2f} > the seed's {seed:.2f}; still saved ({name}): {what_stays(r, unit)}")
    for r in results:
        print(f"{r['case'].name}, saved by module ({name}): {what_stays(r, unit, 8)}")
    print()
    what = (
        f"{args.config} {'x'.join(map(str, Run(config, overrides, torch.device('cpu')).input_size))} batch {args.batch}"
    )
    print(markdown_table(rows_of(results, what, goals=minet)))
    if args.cuda and torch.cuda.is_available():
        print()
        print("\n".join(cuda_peaks(config, overrides, args.batch)))


if __name__ == "__main__":
    main()
