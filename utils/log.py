"""Rank-aware logging: console + log.txt, TensorBoard scalars, images and text, metrics.jsonl, progress bars.

Only rank 0 writes files and shows progress bars; other ranks log warnings and
errors to the console, so a failure on any rank is still visible.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

import numpy as np
from tqdm import tqdm

from utils.files.owned import make_dirs, open_file
from utils.run import metrics_file
from utils.run.folder import RunFolder
from utils.secret_text import masked
from utils.undecodable import shown

log = logging.getLogger(__name__)

_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def setup_logging(log_file: Optional[Path], rank: int = 0, level: int = logging.INFO) -> None:
    """Configure the root logger for this process: the console, and on rank 0 ``log_file`` (the run
    folder's log.txt); idempotent: replaces only its own handlers."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_framework", False):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level if rank == 0 else logging.WARNING)
    prefix = "" if rank == 0 else f"[rank{rank}] "
    console = _Console(sys.stderr)
    console.setFormatter(_Shown(prefix + _FORMAT, "%H:%M:%S"))
    console._framework = True
    if rank != 0:
        console.addFilter(_own_to_this_rank)
    root.addHandler(console)
    if rank == 0 and log_file is not None:
        file_handler = _LogFile(log_file)
        file_handler.setFormatter(_Shown(_FORMAT))
        file_handler._framework = True
        root.addHandler(file_handler)


class _Shown(logging.Formatter):
    """Lines as every text of the framework is shown: every password in a URL masked (``utils/secret_text.py``),
    tracebacks too, since a library's message repeats the URL it was given to connect; and a file name that is
    not UTF-8 as its bytes (``utils/undecodable.py``: a surrogate in log.txt raised inside the handler)."""

    def format(self, record: logging.LogRecord) -> str:
        return masked(shown(super().format(record)))


class _LogFile(logging.FileHandler):
    """The run folder's log.txt, appended to and never through a link (``utils/files/owned.py``: a ``log.txt``
    that is a link is replaced by the run's own, with a warning)."""

    def _open(self) -> Any:
        path = Path(self.baseFilename)
        return open_file(path.parent, path, "a", encoding=self.encoding, errors=self.errors)


def to_log_file(message: str) -> None:
    """``message`` into the run's log.txt alone: a line stdout shows already (the result line ``test: k=v ...``),
    which the log file keeps too."""
    record = logging.LogRecord(__name__, logging.INFO, __file__, 0, message, None, None)
    for handler in logging.getLogger().handlers:
        if getattr(handler, "_framework", False) and isinstance(handler, logging.FileHandler):
            handler.handle(record)


# modules whose warnings every rank of a job gives alike (the config, the data's sizes, the schedule, the first
# batch's shapes): rank 0 says them once, where each rank said them again
REPLICATED = (
    "utils.commands",
    "utils.data.folders",
    "utils.data.input_shape",
    "utils.data.loader",
    "utils.data.shape_from_data",
    "utils.data.stratified",
    "utils.model.summary",
    "utils.optim.schedules",
    "utils.references",
)


def _own_to_this_rank(record: logging.LogRecord) -> bool:
    """On ranks other than 0: a warning of a ``REPLICATED`` module is left to rank 0; errors, and the warnings of
    what a rank meets alone (a bad sample in its slice, a read that failed), still show with its prefix."""
    return record.levelno >= logging.ERROR or not any(
        record.name == name or record.name.startswith(name + ".") for name in REPLICATED
    )


class _Console(logging.StreamHandler):
    """The console's handler: a line logged while a progress bar is shown goes above the bar, which is cleared
    first and drawn again below it (``tqdm.external_write_mode``). Written straight to the terminal, the epoch's
    line was glued onto a bar left at its last redraw (53%: one redraw a second), the bar frozen above it."""

    def emit(self, record: logging.LogRecord) -> None:
        with tqdm.external_write_mode(file=self.stream):
            super().emit(record)


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
    """The run's record on rank 0: log lines, TensorBoard (scalars, images, text, hparams) and metrics.jsonl.

    Every TensorBoard event is at the optimizer step it happened after (epoch-level values at the
    step that ended the epoch), so one axis orders them all. A resumed run (``resume_at`` step S)
    hides what the interrupted process wrote after step S (TensorBoard's ``purge_step``) and drops
    those rows from metrics.jsonl; a test already recorded at a step (a run resumed after its end
    tests again) is not written again: every step is written once. Every method is a no-op off rank 0.
    """

    def __init__(self, run: Optional[RunFolder], enabled: bool) -> None:
        self.enabled = enabled and run is not None
        self._run = run
        self._tb: Any = None  # opened at the first event, after a resume's ``resume_at``
        self._purge_step: Optional[int] = None
        self._closed = False
        self._metrics_path = run.metrics if self.enabled else None
        # (split, step) of the rows metrics.jsonl held when a resume opened it
        self._recorded: Set[Tuple[str, int]] = set()
        self._muted = False
        self._listeners: List[Callable[[int, str, Dict[str, float]], None]] = []

    @property
    def run(self) -> Optional[RunFolder]:
        """The run folder this writer writes into (rank 0); None where it writes nothing."""
        return self._run if self.enabled else None

    def listen(self, listener: Callable[[int, str, Dict[str, float]], None]) -> None:
        """``listener(step, prefix, values)`` gets every group of scalars this writer writes (a tracker)."""
        self._listeners.append(listener)

    def resume_at(self, step: int) -> None:
        """A resumed run continues after step ``step``: what the interrupted process wrote after its checkpoint
        goes (metrics.jsonl's rows, TensorBoard's events: ``purge_step``)."""
        if not self.enabled:
            return
        kept = metrics_file.rewind(self._run.metrics, step)
        self._recorded = {(row.get("split"), row["step"]) for row in kept if "step" in row}
        self._purge_step = step + 1

    def _board(self) -> Any:
        """TensorBoard's writer (rank 0), opened at the first event."""
        if self._tb is None and self.enabled and not self._closed:
            from torch.utils.tensorboard import SummaryWriter  # heavy import, rank 0 only

            make_dirs(self._run.path, self._run.tb)  # a link at tb/ is refused: no events written elsewhere
            self._tb = SummaryWriter(log_dir=str(self._run.tb), purge_step=self._purge_step)
        return self._tb

    @classmethod
    def disabled(cls) -> "RunWriter":
        """A writer that writes nothing (a harness, a rank other than 0)."""
        return cls(None, False)

    def train_step(self, step: int, loss: float, lr: float) -> None:
        """``train/loss`` (the mean since the previous log step) and ``train/lr``."""
        self.scalars("train", {"loss": loss, "lr": lr}, step)

    def train_epoch(self, epoch: int, step: int, metrics: Dict[str, float]) -> None:
        log.info("epoch %d train: %s", epoch, format_metrics(metrics))
        self.scalars("train_epoch", metrics, step)

    def recorded(self, split: str, step: int) -> bool:
        """Whether metrics.jsonl held ``split``'s row of ``step`` when this (resumed) run opened it."""
        return (split, step) in self._recorded

    @contextlib.contextmanager
    def muted(self, mute: bool = True) -> Iterator[None]:
        """Nothing is written inside (a test a resumed run repeats at a step already recorded)."""
        before, self._muted = self._muted, mute or self._muted
        try:
            yield
        finally:
            self._muted = before

    def evaluation(self, split: str, epoch: int, step: int, metrics: Dict[str, float]) -> None:
        """A validation's or the test's metrics: a log line (val), ``<split>/*`` scalars, a metrics.jsonl row."""
        if split == "val":
            log.info("epoch %d val: %s", epoch, format_metrics(metrics))
        nan = sorted(name for name, value in metrics.items() if isinstance(value, float) and math.isnan(value))
        if nan:
            log.warning(
                "%s metric(s) %s are NaN at epoch %d (the outputs or the targets hold NaN, or a metric divided by zero); written as NaN",
                split,
                ", ".join(nan),
                epoch,
            )
        self.scalars(split, metrics, step)
        self.metrics({"split": split, "epoch": epoch, "step": step, **metrics})

    def scalars(self, prefix: str, values: Dict[str, float], step: int) -> None:
        board = None if self._muted else self._board()
        if board is None:
            return
        for listener in self._listeners:
            listener(step, prefix, values)
        for name, value in values.items():
            if isinstance(value, (int, float)):  # NaN and inf too: a value that went wrong stays visible
                board.add_scalar(f"{prefix}/{name}", value, step)

    def image(self, tag: str, image: np.ndarray, step: int) -> None:
        """An ``(H, W, 3)`` uint8 image (a grid, a figure) under ``tag`` in TensorBoard's Images tab."""
        board = None if self._muted else self._board()
        if board is not None:
            board.add_image(tag, image, step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int = 0) -> None:
        """Markdown ``text`` under ``tag`` in TensorBoard's Text tab."""
        board = None if self._muted else self._board()
        if board is not None:
            board.add_text(tag, text, step)

    def hparams(self, params: Dict[str, Any], metrics: Dict[str, float]) -> None:
        """The run's hyperparameters and the scalar tags of its final metrics (HParams tab).

        Written into this run's own event file (``add_hparams`` would open a sub-run), so
        the HParams tab pairs them with the ``metrics`` tags this writer already holds.
        """
        board = None if self._muted else self._board()
        if board is None:
            return
        from torch.utils.tensorboard.summary import hparams

        writer = board._get_file_writer()
        for summary in hparams(params, metrics):
            writer.add_summary(summary)

    def metrics(self, row: Dict[str, Any]) -> None:
        """Append one evaluation row (``split``, ``epoch``, ``step``, metric values) to metrics.jsonl."""
        if self._metrics_path is not None and not self._muted:
            metrics_file.append(self._metrics_path, row)

    def evaluations(self, split: str) -> List[Dict[str, Any]]:
        """The rows of ``split`` that metrics.jsonl holds, in order (on rank 0; none elsewhere)."""
        if self._metrics_path is None:
            return []
        return [row for row in metrics_file.read_lenient(self._metrics_path) if row.get("split") == split]

    def flush(self) -> None:
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        self._closed = True


def format_number(value: Any) -> str:
    """A metric as the lines scripts read show it: a float to 4 decimals, anything else as it is."""
    return f"{value:.4f}" if isinstance(value, float) else f"{value}"


def format_metrics(values: Dict[str, float]) -> str:
    return " ".join(f"{k}={format_number(v)}" for k, v in values.items())


def best_line(monitor: str, value: Optional[float], epoch: Optional[int]) -> str:
    """``best <metric>=<value> at epoch E``: one of the lines scripts read (docs/reliability.md), the value rounded."""
    return f"best {monitor}={format_number(value)} at epoch {epoch}"


def wall_time(seconds: float) -> str:
    """``27.4 s``, ``2 min 05 s``, ``1 h 02 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = int(seconds // 60)
    return f"{minutes} min {int(seconds % 60):02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def closing_line(folder: Path, seconds: float, best: Optional[str] = None) -> str:
    """What a run ends with, after its result line: the wall time, the best validation (a training run's ``best_line``)
    and the folder that holds everything it wrote."""
    return f"done in {wall_time(seconds)}{f'; {best}' if best else ''}; run folder {folder}"
