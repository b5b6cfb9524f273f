"""The checkpointer: the training state at every checkpoint point, and ``best.pt`` after each validation.

A checkpoint point writes ``epoch<E>_batch<B>.pt``, named as the log numbers epochs: epoch E (from 0)
after B of its batches, so epoch 5's end of 19 batches is ``epoch0005_batch000019.pt`` (the training
state inside says where training continues: epoch 6, batch 0). It is written
every ``train.checkpoint_every_steps`` steps inside an epoch,
when the ranks agreed to stop (preemption), and at each epoch's end *before*
that epoch's validation, so a failing validation loses no training. The
validation then commits its outcome (``commit_validation``): its record beside
the file (``utils/checkpoint/records.py``, written here and nowhere else), then
``best.pt`` linked to the file when it is the new best. Non-finite weights are
never written.

Which file is the best is the validator's to say (its state's ``file``: the
checkpoint it validated when that validation was the best), and is kept on
disk in that state alone (in the checkpoint, and in the record after its
validation); the store's ``best`` follows it (``commit_validation``,
``resumed_from``) to keep that file through rotation and link ``best.pt``.

``background`` (``train.async_checkpoint``): the loop only copies the state to
CPU memory; a writer thread writes it (``utils/checkpoint/background.py``) while
training or the validation goes on. The next checkpoint point, a validation's
commit, a preemption, the end of training and ``close`` wait for the write in
flight, and a failed write raises its error there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import torch

from utils.checkpoint.background import BackgroundWriter, cpu_copy
from utils.checkpoint.records import ValidationRecord, read_record, write_record
from utils.checkpoint.snapshot import RunRecord, StateObjects, snapshot_training_state
from utils.checkpoint.state import Progress
from utils.checkpoint.store import CheckpointStore
from utils.distributed.ops import any_rank, barrier
from utils.distributed.process_group import DistInfo
from utils.distributed.replicas import broadcast_buffers
from utils.errors import CheckpointError, NonFiniteError

log = logging.getLogger(__name__)


def weights_finite(*modules: Optional[torch.nn.Module]) -> bool:
    """All parameters and buffers finite, on every rank."""
    bad = any(
        not bool(torch.isfinite(t).all())
        for m in modules
        if m is not None
        for t in (*m.parameters(), *m.buffers())
        if t.is_floating_point()
    )
    return not any_rank(bad)


@dataclass
class Contents:
    """What a checkpoint is taken of: the objects whose state it holds (asked at every save), what it
    records about the run, this process's place, and the sync point to pass first (the trainer's)."""

    objects: Callable[[], StateObjects]
    run: RunRecord
    dist: DistInfo
    sync: Callable[[], None]  # a NaN loss since the last sync point stops the run before the checkpoint


class Checkpointer:
    """Writes checkpoints into ``store`` on rank 0 (every rank calls: random states are gathered)."""

    def __init__(
        self, store: CheckpointStore, contents: Contents, every_steps: int = 0, background: bool = False
    ) -> None:
        self.store, self.contents, self.every_steps = store, contents, every_steps
        self.background = BackgroundWriter() if background else None
        self.last_path: Optional[Path] = None  # the newest checkpoint of this run (or the one it resumed from)
        self._staging: Any = None  # the last background copy: its memory is reused once its write ended

    def prepare(self) -> None:
        """Before training: clear what an interrupted save left, and point best.pt where the state says."""
        if self.contents.dist.is_main:
            self.store.remove_temporaries()
            self.store.repair_best()
        barrier()  # no rank looks at best.pt before rank 0 has repaired it

    def resumed_from(self, path: Path, best: Optional[str]) -> None:
        """A resume from checkpoint ``path``, after which file ``best`` is the best (``StartPoint.best``)."""
        self.last_path, self.store.best = path, best

    def is_periodic(self, step: int, batch: int, num_batches: int) -> bool:
        """Every ``every_steps`` steps inside an epoch (a step that ends the epoch is saved at the epoch's end)."""
        return self.every_steps > 0 and step % self.every_steps == 0 and batch < num_batches

    def save(self, progress: Progress, final: bool = False, named: Optional[Progress] = None) -> Path:
        """The checkpoint of ``progress``, its file named after ``named`` (default: ``progress``; at an epoch's end
        the epoch that ended and its batches, where ``progress`` is the next epoch's start); ``final``: the process
        stops next, so a background write is waited for."""
        named = named or progress
        self.contents.sync()
        objects, dist = self.contents.objects(), self.contents.dist
        if not weights_finite(objects.model, objects.ema.module if objects.ema is not None else None):
            raise NonFiniteError(
                f"the weights became NaN/inf by step {progress.step} (epoch {named.epoch}): its checkpoint was not written"
            )
        path = self.store.path_for(named.epoch, named.batch)
        # One set of replicated buffers (BatchNorm statistics: each rank's last steps updated its own) on every
        # rank before the snapshot: a sharded checkpoint takes them from any rank, and the validation after it
        # scores exactly what it holds; a resume then starts every rank from what the uninterrupted run continues with.
        broadcast_buffers(objects.model)
        self.wait()  # one write in flight at most; and the store is the writer's until it ends
        sharded = self.store.collective  # a sharded store: every rank writes its shards
        data = snapshot_training_state(objects, progress, self.contents.run, sharded)
        if dist.is_main or sharded:
            self.write(data, named)
        if dist.is_main:
            log.info(
                "checkpoint %s (epoch %d, batch %d, step %d)%s",
                path,
                named.epoch,
                named.batch,
                progress.step,
                "; written in the background" if self.background is not None else "",
            )
        if final:
            self.wait()
        barrier()
        self.last_path = path
        return path

    def write(self, data: Dict[str, Any], progress: Progress) -> None:
        """Write a snapshot (rank 0) as the file of ``progress``: at once, or handed to the background writer after a CPU copy."""
        if self.background is None:
            self.store.save(data, progress.epoch, progress.batch)
            return
        self.background.wait()  # the staging copy is the writer's until its write ended
        # training changes the live tensors from the next step on
        copy = self._staging = cpu_copy(data, reuse=self._staging)
        self.background.submit(lambda: self.store.save(copy, progress.epoch, progress.batch))

    def commit_validation(self, validation: ValidationRecord) -> None:
        """After the validation of the newest checkpoint: write its record (its validator's state names the best
        file), then link best.pt when that file is this checkpoint (the validation made it the best)."""
        self.wait()  # the checkpoint's file exists before its record does
        path = self.last_path
        self.store.best = validation.validator.get("file")
        is_best = self.store.best == path.name
        if self.contents.dist.is_main:
            try:
                write_record(path, validation)
                if is_best:
                    self.store.link_best(path)
            except OSError as err:  # a full disk: the checkpoint is complete, a resume validates it again
                raise CheckpointError(
                    f"could not record the validation of '{path}' ({err.strerror or err}); that checkpoint is intact; "
                    "free disk space or fix the folder's permissions and resume with --resume"
                ) from err
            if is_best:
                log.info("best.pt links to %s", path)
        barrier()

    def file_validated_at(self, epoch: Optional[int]) -> Optional[str]:
        """The kept checkpoint whose validation record is of ``epoch`` (the file of a best rebuilt from the
        recorded validations); None when the rotation removed it, or ``epoch`` is None."""
        if epoch is None:
            return None
        for path in self.store.numbered():
            record = read_record(path)
            if record is not None and record.epoch == epoch:
                return path.name
        log.warning(
            "the best epoch under the new eval.monitor (%d) has no checkpoint left (train.keep_checkpoints rotated it away); "
            "best.pt follows the next improvement",
            epoch,
        )
        return None

    def best_path(self) -> Optional[Path]:
        """The checkpoint a finished run tests (see ``CheckpointStore.best_path``)."""
        return self.store.best_path()

    def wait(self) -> None:
        """Block until the background write in flight (if any) is on disk; raise its error."""
        if self.background is not None:
            self.background.wait()

    def finish(self) -> None:
        """The end of training: every write on disk before any rank reads best.pt."""
        self.wait()
        barrier()

    def close(self) -> None:
        # after an error: finish the write in flight (the previous checkpoint stays valid either way)
        try:
            self.wait()
        except Exception as err:  # noqa: BLE001 - the error that ended the run is the one to show
            log.error("the background checkpoint write failed too: %s", err)


@dataclass
class CheckpointSettings:
    """The checkpointer as ``main.py`` configures it (``train.keep_checkpoints`` in the store,
    ``train.checkpoint_every_steps``, ``train.async_checkpoint``); the trainer builds it with its ``Contents``."""

    store: CheckpointStore
    every_steps: int = 0
    background: bool = False

    def build(self, contents: Contents) -> Checkpointer:
        return Checkpointer(self.store, contents, self.every_steps, self.background)


class NoCheckpointer:
    """A run that writes no checkpoints (test mode, a harness)."""

    last_path: Optional[Path] = None

    def prepare(self) -> None:
        pass

    def resumed_from(self, path: Path, best: Optional[str]) -> None:
        pass

    def is_periodic(self, step: int, batch: int, num_batches: int) -> bool:
        return False

    def save(self, progress: Progress, final: bool = False, named: Optional[Progress] = None) -> None:
        return None

    def commit_validation(self, validation: ValidationRecord) -> None:
        pass

    def file_validated_at(self, epoch: Optional[int]) -> None:
        return None

    def best_path(self) -> None:
        return None

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass
