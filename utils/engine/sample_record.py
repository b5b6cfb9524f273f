"""``train.record_samples``: rank 0 writes ``samples.jsonl``, the samples every optimizer step saw.

One line per step, ``{"step": S, "keys": [...]}``: the sample keys (``utils/data/identity.py``:
relative paths for folders, indices for in-memory data) of every batch that made step S, in the
order the step consumed them (``train.accumulate`` batches one after another), each batch over
all ranks in rank order. Rank 0 computes them from the sampler's order (``utils/data/sample_order.py``):
no collective per step, no tensor read. The lines are buffered and appended at log steps,
before every checkpoint and at the end, so a checkpoint never covers a step the file lacks.
A resumed run first cuts the file back to the steps its checkpoint holds (a kill -9 after a
flush but before the next checkpoint left later lines, perhaps one cut short): no step is
written twice or lost.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from utils.data.identity import sample_keys
from utils.data.sample_order import EpochBatches, epoch_batches_of_all_ranks, tells_order
from utils.errors import ConfigError, OutputError
from utils.files.owned import open_file, write_text

log = logging.getLogger(__name__)


class SampleRecorder:
    """Writes ``path`` (None: records nothing, as on ranks other than 0) for the training ``loader``
    of ``world_size`` ranks (its ``sampler``, ``batch_size`` and ``dataset`` are what every rank has)."""

    def __init__(self, path: Optional[Path], loader: Any, world_size: int) -> None:
        self.path = path
        self._loader, self._world_size = loader, world_size
        if path is not None and not tells_order(getattr(loader, "sampler", None)):
            raise ConfigError(
                "train.record_samples needs the framework's training loader, whose sampler tells each rank's order; "
                "set train.record_samples=false"
            )
        self._keys: Optional[Sequence[str]] = None  # the dataset's key table (or list), read at the first step
        self._epoch: Optional[int] = None
        self._batches: Optional[EpochBatches] = None  # the current epoch's, over all ranks
        self._pending: List[str] = []
        self._mode = "w"  # a fresh run starts the file; a resumed one appends to what it kept

    def step(self, epoch: int, step: int, first: int, end: int) -> None:
        """Step ``step`` of ``epoch`` consumed the epoch's batches ``first`` to ``end - 1``."""
        if self.path is None:
            return
        if self._batches is None or epoch != self._epoch:
            loader = self._loader
            self._batches = epoch_batches_of_all_ranks(loader.sampler, epoch, self._world_size, loader.batch_size)
            self._epoch = epoch
        if self._keys is None:
            self._keys = sample_keys(self._loader.dataset)
        indices = self._batches.span(first, end)  # this step's keys only: from a key table in one gather
        take = getattr(self._keys, "take", None)
        keys = take(indices) if take is not None else [self._keys[i] for i in indices.tolist()]
        self._pending.append(json.dumps({"step": step, "keys": keys}) + "\n")

    def flush(self) -> None:
        """Append the buffered lines (a log step, before a checkpoint, the end)."""
        if self.path is None or not self._pending:
            return
        try:
            with open_file(self.path.parent, self.path, self._mode) as fh:
                fh.writelines(self._pending)
        except OSError as err:
            raise OutputError.writing(self.path, err) from err
        self._pending, self._mode = [], "a"

    def resume_at(self, step: int) -> None:
        """Keep the lines of steps up to ``step`` (the restored checkpoint's); later ones are written again."""
        if self.path is None:
            return
        self._mode, self._pending = "a", []
        # bytes that are not UTF-8 make their line no record (dropped as a damaged one), never a traceback
        lines = self.path.read_text(errors="replace").splitlines(keepends=True) if self.path.is_file() else []
        kept = _lines_up_to(lines, step)
        if len(kept) != len(lines):
            write_text(self.path.parent, self.path, "".join(kept), "resume with --resume")
        last = _step_of(kept[-1]) if kept else 0
        if last < step:
            log.warning(
                "samples.jsonl records steps up to %d, the checkpoint is at step %d: steps %d-%d are not recorded "
                "(train.record_samples was off then); it continues with step %d",
                last,
                step,
                last + 1,
                step,
                step + 1,
            )


def _parsed(line: str) -> Optional[Dict[str, Any]]:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and isinstance(row.get("step"), int) else None


def _step_of(line: str) -> int:
    row = _parsed(line)
    return row["step"] if row is not None else 0


def _lines_up_to(lines: List[str], step: int) -> List[str]:
    """The leading complete lines of steps <= ``step``: a line cut short by a kill ends what is kept."""
    kept = []
    for line in lines:
        row = _parsed(line)
        if row is None or not line.endswith("\n") or row["step"] > step:
            break
        kept.append(line)
    return kept
