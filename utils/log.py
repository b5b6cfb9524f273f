"""Rank-aware logging: console + log.txt, TensorBoard scalars, images and text, metrics.jsonl, progress bars.

Only rank 0 writes files and shows progress bars; other ranks log warnings and
errors to the console, so a failure on any rank is still visible.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Optional

import numpy as np
from tqdm import tqdm

_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def setup_logging(output_dir: Optional[Path], rank: int = 0, level: int = logging.INFO) -> None:
    """Configure the root logger for this process (idempotent: replaces only its own handlers)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_framework", False):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level if rank == 0 else logging.WARNING)
    prefix = "" if rank == 0 else f"[rank{rank}] "
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter(prefix + _FORMAT, "%H:%M:%S"))
    console._framework = True
    root.addHandler(console)
    if rank == 0 and output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(output_dir / "log.txt")
        file_handler.setFormatter(logging.Formatter(_FORMAT))
        file_handler._framework = True
        root.addHandler(file_handler)


def progress(iterable: Iterable, total: Optional[int], desc: str, enabled: bool) -> Iterable:
    """A tqdm bar on rank 0 when stderr is a terminal; the bare iterable elsewhere.

    Log files and CI consoles get the per-epoch log lines instead of bar redraws.
    """
    if not enabled or not sys.stderr.isatty():
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True, mininterval=1.0, file=sys.stderr)


def progress_bar(total: int, desc: str, enabled: bool) -> Optional[tqdm]:
    """A tqdm bar to update by hand, under the same conditions as ``progress``; None otherwise."""
    if not enabled or not sys.stderr.isatty():
        return None
    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True, mininterval=1.0, file=sys.stderr)


class RunWriter:
    """TensorBoard (scalars, images, text, hparams) and metrics.jsonl for one run; every method is a no-op off rank 0."""

    def __init__(self, output_dir: Optional[Path], enabled: bool) -> None:
        self.enabled = enabled and output_dir is not None
        self._tb = None
        self._metrics_path = None
        if self.enabled:
            from torch.utils.tensorboard import (
                SummaryWriter,  # heavy import, rank 0 only
            )

            self._tb = SummaryWriter(log_dir=str(output_dir / "tb"))
            self._metrics_path = output_dir / "metrics.jsonl"

    def scalars(self, prefix: str, values: Dict[str, float], step: int) -> None:
        if self._tb is None:
            return
        for name, value in values.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                self._tb.add_scalar(f"{prefix}/{name}", value, step)

    def image(self, tag: str, image: np.ndarray, step: int) -> None:
        """An ``(H, W, 3)`` uint8 image (a grid, a figure) under ``tag`` in TensorBoard's Images tab."""
        if self._tb is not None:
            self._tb.add_image(tag, image, step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int = 0) -> None:
        """Markdown ``text`` under ``tag`` in TensorBoard's Text tab."""
        if self._tb is not None:
            self._tb.add_text(tag, text, step)

    def hparams(self, params: Dict[str, Any], metrics: Dict[str, float]) -> None:
        """The run's hyperparameters and the scalar tags of its final metrics (HParams tab).

        Written into this run's own event file (``add_hparams`` would open a sub-run), so
        the HParams tab pairs them with the ``metrics`` tags this writer already holds.
        """
        if self._tb is None:
            return
        from torch.utils.tensorboard.summary import hparams

        writer = self._tb._get_file_writer()
        for summary in hparams(params, metrics):
            writer.add_summary(summary)

    def metrics(self, row: Dict[str, Any]) -> None:
        """Append one evaluation row (``split``, ``epoch``, metric values) to metrics.jsonl."""
        if self._metrics_path is None:
            return
        with open(self._metrics_path, "a") as fh:
            fh.write(json.dumps(row) + "\n")

    def flush(self) -> None:
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def run_writer(trainer: Any) -> RunWriter:
    """The run's writer, which the logging hook holds (a no-op writer when a trainer has none)."""
    try:
        logging_hook = trainer.hooks.get("logging")
    except KeyError:
        return RunWriter(None, False)
    return logging_hook.writer(trainer)


def format_metrics(values: Dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
