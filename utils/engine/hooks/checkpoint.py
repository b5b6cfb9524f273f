"""Checkpoint hook: the training state, every N steps, at each epoch's end (and best.pt), and on preemption."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from utils.checkpoint.background import BackgroundWriter, cpu_copy
from utils.checkpoint.state import Progress, capture
from utils.checkpoint.store import CheckpointStore
from utils.distributed.ops import any_rank, barrier
from utils.errors import NonFiniteError
from utils.hook import Hook
from utils.registry import HOOKS

log = logging.getLogger(__name__)


def weights_finite(*modules: Optional[torch.nn.Module]) -> bool:
    """All parameters and buffers finite, on every rank."""
    bad = any(not bool(torch.isfinite(t).all()) for m in modules if m is not None for t in (*m.parameters(), *m.buffers()) if t.is_floating_point())
    return not any_rank(bad)


@HOOKS.register("checkpoint")
class CheckpointHook(Hook):
    """Saves ``epoch<E>_batch<B>.pt`` (the point training continues from) in ``directory``.

    After a step: every ``every_steps`` steps inside an epoch (``train.checkpoint_every_steps``)
    and when the preemption hook set ``state.preempted``. After an epoch: always, and
    ``best.pt`` links to it when validation found a new best. Non-finite weights are never
    written. Runs last (priority 70), so the other hooks' state of that step is in the file.

    Its own state is the name of the best epoch's file: a checkpoint that is a new best
    names itself, so whichever file a resume starts from says which file ``best.pt``
    must be (see ``CheckpointStore.repair_best``).

    ``background`` (``train.async_checkpoint``): the loop only copies the state to CPU
    memory; a writer thread writes it (``utils/checkpoint/background.py``). The next
    checkpoint, a preemption, the end of training and ``close`` wait for the write in
    flight, and a failed write raises its error there.
    """

    name = "checkpoint"  # in logs and checkpoints
    priority = 70

    def __init__(self, directory: str, every_steps: int = 0, keep: int = 2, background: bool = False) -> None:
        self.store = CheckpointStore(Path(directory), keep)
        self.every_steps = every_steps
        self.writer = BackgroundWriter() if background else None
        self._staging: Any = None  # the last background copy: its memory is reused once its write ended

    def before_train(self, trainer: Any) -> None:
        if trainer.options.is_main:
            self.store.remove_temporaries()
            self.store.repair_best()
        barrier()  # no rank looks at best.pt before rank 0 has repaired it

    def after_step(self, trainer: Any) -> None:
        state = trainer.state
        # a step that ends the epoch is saved by after_epoch anyway
        periodic = self.every_steps > 0 and state.step % self.every_steps == 0 and state.batch < trainer.num_batches
        if periodic or state.preempted is not None:
            self.save(trainer, Progress(state.epoch, state.batch, state.step))

    def after_epoch(self, trainer: Any) -> None:
        state = trainer.state
        self.save(trainer, Progress(state.epoch + 1, 0, state.step), best=state.is_best)

    def save(self, trainer: Any, progress: Progress, best: bool = False) -> None:
        """Write the checkpoint of ``progress`` on rank 0 (every rank calls: the random states are gathered)."""
        parts = trainer.parts
        trainer.sync(agree=True)  # a NaN loss since the last sync point stops the run before this checkpoint
        if not weights_finite(parts.model, parts.ema.module if parts.ema is not None else None):
            raise NonFiniteError(
                f"the weights became NaN/inf by step {progress.step} (epoch {progress.epoch}); no checkpoint written, "
                f"the last good one '{trainer.state.last_checkpoint}' is kept; lower optim.lr or enable train.clip_grad_norm"
            )
        path = self.store.path_for(progress.epoch, progress.batch)
        self.wait()  # one write in flight at most; and the store (its best) is the writer's until it ends
        if best:
            self.store.best = path.name  # before capture: the file names itself as the best
        options = trainer.options
        data = capture(trainer.state_objects(), progress, options.config, options.world_size, options.classes)
        if trainer.options.is_main:
            self.write(data, progress)
            log.info("checkpoint %s (epoch %d, batch %d, step %d)%s%s", path, progress.epoch, progress.batch, progress.step,
                     "; best.pt links to it" if best else "", "; written in the background" if self.writer is not None else "")
        if trainer.state.preempted is not None:
            self.wait()  # the process stops next: the file must exist
        barrier()
        trainer.state.last_checkpoint = str(path)

    def write(self, data: Dict[str, Any], progress: Progress) -> None:
        """Write a captured state (rank 0): at once, or handed to the background writer after a CPU copy."""
        if self.writer is None:
            self.store.save(data, progress.epoch, progress.batch)
            return
        self.writer.wait()  # the staging copy is the writer's until its write ended
        copy = self._staging = cpu_copy(data, reuse=self._staging)  # training changes the live tensors from the next step on
        self.writer.submit(lambda: self.store.save(copy, progress.epoch, progress.batch))

    def wait(self) -> None:
        """Block until the background write in flight (if any) is on disk; raise its error."""
        if self.writer is not None:
            self.writer.wait()

    def after_train(self, trainer: Any) -> None:
        self.wait()
        barrier()  # every rank reads best.pt next

    def close(self) -> None:
        # after an error: finish the write in flight (the previous checkpoint stays valid either way)
        try:
            self.wait()
        except Exception as err:  # noqa: BLE001 - the error that ended the run is the one to show
            log.error("the background checkpoint write failed too: %s", err)

    def state_dict(self) -> Dict[str, Any]:
        return {"best": self.store.best}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.store.best = state.get("best")
