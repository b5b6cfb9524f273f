"""Run the benchmarks and print one table of ratios: ``python benchmarks/run.py [--quick]``.

Every ratio compares two things measured in the same run, interleaved and
repeated (the range column shows the noise). The full run also writes
``benchmarks/RESULTS.md`` with the machine description.

A benchmark module has ``run(quick: bool = False) -> list[dict]``; a row has
``benchmark``, ``measure``, ``value``, and optionally ``spread``, ``goal``,
``ok`` (True/False/None) and ``note``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

# (module, what it measures); bench_amp comes from the mixed-precision work and may be absent.
BENCHMARKS = [
    ("bench_framework", "1 framework step"),
    ("bench_prefetch", "2 prefetch"),
    ("bench_checkpoint", "3 grad checkpointing"),
    ("bench_amp", "4 amp on CPU"),
    ("bench_ddp", "5 DDP"),
    ("bench_visual", "6 TensorBoard pictures"),
    ("bench_checkpoint_write", "7 checkpoint write"),
    ("bench_host_reads", "8 host reads"),
    ("bench_compile", "9 torch.compile"),
    ("bench_channels_last", "10 channels_last"),
    ("bench_startup", "11 start-up"),
    ("bench_async_checkpoint", "12 background checkpoint"),
    ("bench_world_resume", "13 resume on another world size"),
    ("bench_fsdp", "14 FSDP2"),
    ("bench_predict", "15 predict"),
    ("bench_export", "16 export"),
    ("bench_compare", "17 compare"),
    ("bench_sweep", "18 sweep"),
    ("bench_image_folder", "19 image_folder loader"),
    ("bench_shards", "20 shards"),
    ("bench_shard_formats", "21 shard formats"),
    ("bench_sample_arrays", "22 sample arrays"),
    ("bench_index_scale", "23 index at scale"),
    ("bench_trackers", "25 trackers"),
    ("bench_memory", "26 memory"),
]
COLUMNS = ("benchmark", "measure", "value", "spread", "goal", "ok", "note")


def machine() -> Dict[str, str]:
    """CPU model, cores, load, library versions: the context the figures belong to."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "load average (1, 5, 15 min)": load,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "os": platform.platform(),
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
    }


def collect(quick: bool, only: List[str]) -> List[dict]:
    rows: List[dict] = []
    for module_name, title in BENCHMARKS:
        if only and not any(key in module_name for key in only):
            continue
        if importlib.util.find_spec(f"benchmarks.{module_name}") is None:
            rows.append(
                {
                    "benchmark": title,
                    "measure": "not available",
                    "value": "-",
                    "note": f"benchmarks/{module_name}.py is not in this checkout",
                }
            )
            continue
        start = time.perf_counter()
        print(f"running {module_name} ...", file=sys.stderr, flush=True)
        try:
            rows.extend(importlib.import_module(f"benchmarks.{module_name}").run(quick=quick))
        except Exception as err:  # one broken benchmark must not hide the others' figures
            traceback.print_exc()
            rows.append(
                {
                    "benchmark": title,
                    "measure": "failed",
                    "value": "-",
                    "ok": False,
                    "note": f"{type(err).__name__}: {err}".splitlines()[0],
                }
            )
        print(f"  {module_name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return rows


def _cell(value: object) -> str:
    if value is None:
        return ""
    if value is True:
        return "yes"
    if value is False:
        return "NO"
    return str(value).replace("|", "/")


def markdown_table(rows: List[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        extra = {k: v for k, v in r.items() if k not in COLUMNS and k != "median"}
        cells = [_cell(r.get(c)) for c in COLUMNS]
        if extra:  # rows from other modules may carry fields of their own
            cells[-1] = (cells[-1] + " " + ", ".join(f"{k}={v}" for k, v in extra.items())).strip()
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="a fast smoke run (few rounds; figures are not meaningful)"
    )
    parser.add_argument("--only", default="", help="comma-separated benchmark names, e.g. framework,ddp")
    parser.add_argument(
        "--out", default=None, help="results file (default: benchmarks/RESULTS.md for a full run, none for --quick)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one thread per process: comparable figures on a shared machine
    info = machine()
    start = time.perf_counter()
    rows = collect(args.quick, [s.strip() for s in args.only.split(",") if s.strip()])
    elapsed = time.perf_counter() - start
    info["load average at the end"] = (
        ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    )
    info["suite time"] = f"{elapsed:.0f} s" + (" (--quick)" if args.quick else "")
    table = markdown_table(rows)
    print(table)
    print(
        f"\n{info['suite time']} on {info['cpu']} ({info['cores']} cores), torch {info['torch']}, load {info['load average (1, 5, 15 min)']}"
    )
    out = args.out or (None if args.quick else str(Path(__file__).with_name("RESULTS.md")))
    if out:
        text = (
            [
                "# Benchmark results",
                "",
                "Produced by `python benchmarks/run.py`" + (" --quick" if args.quick else "") + ".",
                "",
                "## Machine",
                "",
            ]
            + [f"- {k}: {v}" for k, v in info.items()]
            + [
                "",
                "## Figures",
                "",
                "value: median over rounds; spread: min .. max over the rounds (interleaved, same run).",
                "",
                table,
                "",
            ]
        )
        Path(out).write_text("\n".join(text))
        print(f"wrote {out}", file=sys.stderr)
    return 1 if any(r.get("measure") == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
