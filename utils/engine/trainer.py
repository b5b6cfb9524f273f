"""The epoch loop: train, validate, checkpoint (per epoch, every N steps, on preemption), resume exactly.

A checkpoint holds everything the continuation depends on: weights (and EMA),
optimizer, scheduler, amp loss scale, the epoch and the batches of it already
consumed, the sampler's (seed, epoch), the non-finite-loss count, the resolved
config, and the random states of every rank (gathered to rank 0, which writes
the file; each rank restores its own). Resuming restores them, skips the
consumed batches through the sampler (they are not loaded) and continues as if
the run had never stopped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch

from utils import __version__
from utils.checkpoint.rng import capture_rng, restore_rank_rng
from utils.checkpoint.store import CheckpointStore
from utils.distributed.ops import (
    all_gather_objects,
    any_rank,
    barrier,
    get_rank,
    is_main,
)
from utils.distributed.parallel import unwrap, without_ddp
from utils.distributed.preempt import Preempted, StopFlag
from utils.distributed.replicas import broadcast_buffers
from utils.engine.control import BestTracker, monitored_value, should_validate
from utils.engine.epoch import train_one_epoch
from utils.engine.evaluate import evaluate
from utils.engine.nonfinite import NonFinitePolicy
from utils.errors import NonFiniteError
from utils.log import RunWriter, format_metrics

log = logging.getLogger(__name__)


@dataclass
class LoopOptions:
    """The loop's settings, as plain values (``main.py`` fills them from the config)."""

    epochs: int
    step_limit: Optional[int] = None  # a step budget (train.iterations)
    accumulate: int = 1
    clip_grad_norm: Optional[float] = None
    clip_grad_value: Optional[float] = None
    log_every: int = 10
    checkpoint_every_steps: int = 0
    eval_every: int = 1
    monitor: str = "top1"
    show_progress: bool = True


def weights_finite(*modules: Optional[torch.nn.Module]) -> bool:
    """All parameters and buffers finite, on every rank."""
    bad = any(not bool(torch.isfinite(t).all()) for m in modules if m is not None for t in (*m.parameters(), *m.buffers()) if t.is_floating_point())
    return not any_rank(bad)


class Trainer:
    """Runs epochs from a resume point to the end of training; see the module docstring."""

    def __init__(self, model, optimizer, scheduler, amp, ema, criterion, metric, train_loader, val_loader, writer: RunWriter,
                 tracker: BestTracker, store: CheckpointStore, nonfinite: NonFinitePolicy, options: LoopOptions,
                 device: torch.device, config: Dict[str, Any], world_size: int) -> None:
        self.model, self.optimizer, self.scheduler, self.amp, self.ema = model, optimizer, scheduler, amp, ema
        self.criterion, self.metric, self.train_loader, self.val_loader = criterion, metric, train_loader, val_loader
        self.writer, self.tracker, self.store, self.nonfinite, self.opt = writer, tracker, store, nonfinite, options
        self.device, self.config, self.world_size = device, config, world_size
        self.num_batches = len(train_loader)
        self.last_saved: Optional[str] = None

    def state(self, epoch: int, batch: int, step: int) -> Dict[str, Any]:
        """The checkpoint of the point where training continues: epoch ``epoch`` after ``batch`` batches."""
        rng = all_gather_objects(capture_rng())  # a collective: every rank calls state()
        sampler = self.train_loader.sampler
        return {
            "model": unwrap(self.model).state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "ema_updates": self.ema.updates if self.ema is not None else 0,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "amp": self.amp.state_dict(),
            "epoch": epoch,
            "batch": batch,
            "global_step": step,
            "best": self.tracker.state_dict(),
            "nonfinite": self.nonfinite.state_dict(),
            "sampler": {**(sampler.state_dict() if hasattr(sampler, "state_dict") else {}), "batches_done": batch},
            "rng": rng,
            "world_size": self.world_size,
            "config": self.config,
            "version": __version__,
        }

    def save(self, epoch: int, batch: int, step: int, best: bool = False) -> None:
        """Checkpoint on rank 0 (all ranks call: the random states are gathered); never non-finite weights."""
        if not weights_finite(unwrap(self.model), self.ema.module if self.ema is not None else None):
            raise NonFiniteError(f"the weights became NaN/inf by step {step} (epoch {epoch}); no checkpoint written, the last good one '{self.last_saved}' is kept; lower optim.lr or enable train.clip_grad_norm")
        state = self.state(epoch, batch, step)
        if is_main():
            self.store.save(state, epoch, batch)
            log.info("checkpoint %s (epoch %d, batch %d, step %d)", self.store.path_for(epoch, batch), epoch, batch, step)
            if best:
                self.store.save_as(state, "best.pt")
        barrier()
        self.last_saved = str(self.store.path_for(epoch, batch))

    def resume(self, state: Dict[str, Any], same_data: bool) -> int:
        """Random states, non-finite count and the batch to continue from (0 when the data changed)."""
        self.nonfinite.load_state_dict(state.get("nonfinite", {}))
        batch = int(state.get("batch", 0))
        if batch and not same_data:
            log.warning("the data or world size changed (--resume-force): epoch %d restarts from its first batch", state["epoch"])
            batch = 0
        if state.get("rng") is not None or "batch" in state:
            restore_rank_rng(state.get("rng"), get_rank())
        return batch

    def _on_step(self, flag: StopFlag, epoch: int, done: int, step: int) -> bool:
        stop = flag.agreed()
        every = self.opt.checkpoint_every_steps
        if stop or (every > 0 and step % every == 0 and done < self.num_batches):  # the epoch's end saves anyway
            self.save(epoch, done, step)
        return stop

    def _skip(self, loader: Any, count: int) -> Any:
        if count == 0:
            return loader
        if hasattr(loader.sampler, "skip_first"):
            loader.sampler.skip_first(count * loader.batch_size)  # the skipped samples are never loaded
            return loader
        log.warning("this loader cannot skip samples: reading and dropping %d batches", count)
        it = iter(loader)
        for _ in range(count):
            next(it)
        return it

    def validate(self, epoch: int) -> bool:
        """Evaluate (and the EMA), log, update the best tracker; True when this epoch is the best."""
        broadcast_buffers(self.model)  # rank 0's BatchNorm statistics, the ones its checkpoint keeps
        results = evaluate(without_ddp(self.model), self.val_loader, self.criterion, self.metric, self.amp, self.device, len(self.val_loader), self.opt.show_progress)
        if self.ema is not None:  # the average is evaluated alongside the raw weights
            ema_results = evaluate(self.ema.module, self.val_loader, self.criterion, self.metric, self.amp, self.device, len(self.val_loader), self.opt.show_progress)
            results.update({f"ema_{k}": v for k, v in ema_results.items()})
        log.info("epoch %d val: %s", epoch, format_metrics(results))
        self.writer.scalars("val", results, epoch)
        self.writer.metrics({"split": "val", "epoch": epoch, **results})
        is_best = self.tracker.update(monitored_value(results, self.opt.monitor), epoch)
        if self.tracker.should_stop:
            log.info("early stop after epoch %d: %s has not improved for %d evaluations (train.patience)", epoch, self.opt.monitor, self.tracker.evals_since_best)
        return is_best

    def fit(self, start_epoch: int, start_batch: int, step: int) -> int:
        """Train from (epoch, batch, global step) to the end; returns the final step.

        Raises Preempted after the checkpoint of a SIGTERM/SIGINT is written.
        """
        opt, limit = self.opt, self.opt.step_limit
        with StopFlag() as flag:
            for epoch in range(start_epoch, opt.epochs):
                if self.tracker.should_stop or (limit is not None and step >= limit):  # also when resuming a finished run
                    break
                self.train_loader.sampler.set_epoch(epoch)
                skip = start_batch if epoch == start_epoch else 0
                stats = train_one_epoch(
                    self.model, self._skip(self.train_loader, skip), self.criterion, self.optimizer, self.scheduler, self.amp,
                    self.device, epoch, step, self.writer, num_batches=self.num_batches, accumulate=opt.accumulate,
                    clip_grad_norm=opt.clip_grad_norm, clip_grad_value=opt.clip_grad_value, log_every=opt.log_every,
                    show_progress=opt.show_progress, ema=self.ema, max_steps=limit, start_batch=skip,
                    on_step=lambda done, at: self._on_step(flag, epoch, done, at), nonfinite=self.nonfinite,
                )
                step = int(stats.pop("global_step"))
                if stats.pop("stopped"):
                    raise Preempted(flag.signum, self.last_saved)
                log.info("epoch %d train: %s", epoch, format_metrics(stats))
                is_best = False
                if should_validate(epoch, opt.eval_every, opt.epochs, limit is not None and step >= limit):
                    is_best = self.validate(epoch)
                self.save(epoch + 1, 0, step, best=is_best)
        return step
