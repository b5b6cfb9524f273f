"""The Trainer: ``fit()`` calls the built-in services in one visible order; hooks extend it.

One run, as ``fit`` reads::

    checkpointer.prepare, before_train; a resumed run first finishes a validation left pending
    for each epoch from state.epoch (a resume continues inside it, after state.batch batches):
        before_epoch
        until the epoch's batches are consumed (or train.iterations is reached):
            run_step       forward + loss + backward over one accumulation group, then the optimizer step
            accounting     a sync point when due (log steps; under DDP the ranks' agreement)
            EMA            follows the weights when the step was taken
            writer         train/loss and train/lr at log steps
            after_step     hooks
            checkpointer   every train.checkpoint_every_steps steps; when the ranks agreed to stop, then Preempted
        writer (the epoch's training metrics), after_epoch hooks
        checkpointer       the epoch's checkpoint, always BEFORE its validation
        validator          when due: evaluate, commit (record + best.pt), writer, after_validation hooks;
                           early stopping
    checkpointer.finish, after_train; returns a TrainResult (the best checkpoint, its epoch and value)

Hooks (``utils/hook/``) run by priority; they read ``trainer.state``, ``parts``,
``dist``, ``meta`` and ``writer``. The loop reads no tensor value between sync
points (``accounting.py``): on a GPU the host queues step after step.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

from torch import nn

from utils.amp import ClipOptions, StepResult
from utils.checkpoint.rng import rng_untouched
from utils.checkpoint.state import Progress, StateObjects
from utils.data.batch import batch_size_of, to_device
from utils.data.prefetch import stop_workers
from utils.distributed.fsdp import gradient_sync_off
from utils.distributed.parallel import unwrap, without_ddp
from utils.distributed.preempt import Preempted
from utils.distributed.process_group import DistInfo
from utils.distributed.unused import unused_parameters_error
from utils.engine.accounting import StepAccounting
from utils.engine.components import (
    LoopOptions,
    LoopState,
    Parts,
    RunMeta,
    Services,
    TrainResult,
)
from utils.engine.evaluate import evaluate
from utils.engine.input_check import check_output_classes, input_error
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.stop import StopSignal
from utils.hook.hook_list import HookList
from utils.model.outputs import check_network_outputs, prediction_key
from utils.optim.schedules import rewind

log = logging.getLogger(__name__)


class Trainer:
    """Trains ``parts.model`` with ``loop``; ``services`` are the built-in behaviours, ``hooks`` the added ones."""

    def __init__(
        self, parts: Parts, loop: LoopOptions, services: Optional[Services] = None, hooks: Sequence[Any] = (), dist: Optional[DistInfo] = None, meta: Optional[RunMeta] = None
    ) -> None:
        services = services or Services()  # a harness: no files, no checkpoints, no validation
        self.parts, self.options, self.dist, self.meta = parts, loop, dist or DistInfo(), meta or RunMeta()
        self.writer, self.checkpointer, self.validator = services.writer, services.checkpointer, services.validator
        self.hooks = HookList(hooks)
        self.state = LoopState()
        # taken once: a resumable sampler's len() shrinks while it skips a resumed epoch's first batches
        self.num_batches = len(parts.train_loader) if parts.train_loader is not None else 0
        self.nonfinite = NonFinitePolicy(loop.nonfinite, loop.max_nonfinite_skips)
        self.stop = StopSignal(self.dist.world_size)
        self.accounting = StepAccounting(self.nonfinite, self.stop, loop.log_every, loop.sync_every or 0, parts.amp.scales_loss)
        self._watch_skipped_steps()
        self._batches: Optional[Iterator[Any]] = None
        self._forwards = 0
        self._clip = ClipOptions(loop.clip_grad_norm, loop.clip_grad_value)

    def _watch_skipped_steps(self) -> None:
        """What must take back a step the device skipped, learnt at the next sync point."""
        p = self.parts
        if p.scheduler is not None:
            self.accounting.on_skipped(lambda records: rewind(p.scheduler, len(records)))
        if p.ema is not None:
            self.accounting.on_skipped(lambda records: p.ema.uncount(len(records)))
        self.accounting.on_skipped(p.amp.count_overflows)

    # -- what hooks and services ask ----------------------------------------------------------

    @property
    def out_of_steps(self) -> bool:
        """Whether the step budget (``train.iterations``) is used up."""
        return self.options.step_limit is not None and self.state.step >= self.options.step_limit

    def state_objects(self) -> StateObjects:
        """What a checkpoint holds the state of (see ``utils/checkpoint/state.py``)."""
        p = self.parts
        loop = {"nonfinite": self.nonfinite, "validator": self.validator, "checkpointer": self.checkpointer}
        return StateObjects(model=unwrap(p.model), optimizer=p.optimizer, scheduler=p.scheduler, amp=p.amp, ema=p.ema, loop=loop, hooks=self.hooks.stateful())

    def evaluate(self, model: nn.Module, loader: Any, split: str, on_batch: Optional[Callable[[Any, Any, Any], None]] = None) -> Dict[str, float]:
        """``model``'s metrics on ``loader``, reduced exactly over all ranks; the hooks' ``after_eval_batch``
        see every batch of ``split`` (val, val_ema, test)."""
        p = self.parts
        listener = self.hooks.batch_listener(self, split, loader, on_batch)
        return evaluate(model, loader, p.criterion, p.metric, p.amp, self.dist.device, self.dist.is_main, listener)

    def sync(self, agree: bool = False) -> None:
        """Read and replay what the steps since the last sync left on the device (one host read); with
        ``agree`` the ranks also agree on stop requests and NaN losses. May raise NonFiniteError."""
        self.accounting.sync(self.state.step, agree)

    def read_loss(self) -> float:
        """The mean training loss of the steps since the previous call: what the logs show (one read per step at most)."""
        return self.accounting.read_loss(self.state.step)

    # -- the loop -----------------------------------------------------------------------------

    def fit(self) -> TrainResult:
        """Train from ``state`` (a fresh start or a restored checkpoint) to the end; the best checkpoint.

        Raises Preempted after the checkpoint a SIGTERM/SIGINT asked for is written.
        """
        state = self.state
        self.checkpointer.prepare(self.dist.is_main)
        self.stop.install()
        self.hooks.call("before_train", self)
        if self.validator.pending is not None:  # resumed from a checkpoint whose validation did not finish
            position, state.epoch = state.epoch, self.validator.pending  # hooks see the epoch it validates
            self._validate()
            state.epoch = position
        state.stop = state.stop or self.validator.tracker.should_stop  # a resumed run that had stopped early
        while state.epoch < self.options.epochs and not state.stop and not self.out_of_steps:
            self._train_epoch()
            complete = state.batch >= self.num_batches  # else the step budget ended the run inside the epoch
            self.writer.train_epoch(state.epoch, state.step, state.train_metrics)
            self.hooks.call("after_epoch", self)
            last = state.epoch + 1 >= self.options.epochs or self.out_of_steps
            if self.validator.due(state.epoch, last):
                self.validator.pending = state.epoch
            position = Progress(state.epoch + 1, 0, state.step) if complete else Progress(state.epoch, state.batch, state.step)
            stopping = self.stop.agreed is not None  # agreed at the epoch's last sync: its validation runs after the resume
            self.checkpointer.save(self, position, final=stopping)
            if stopping:
                raise Preempted(self.stop.agreed, str(self.checkpointer.last_path))
            if self.validator.pending is not None:
                self._validate()
            if complete:
                state.epoch, state.batch = state.epoch + 1, 0
        self.checkpointer.finish()
        self.hooks.call("after_train", self)
        tracker = self.validator.tracker
        return TrainResult(self.checkpointer.best_path(), self.validator.monitor, tracker.value, tracker.epoch)

    def _train_epoch(self) -> None:
        state = self._start_epoch()
        try:
            while state.batch < self.num_batches and not self.out_of_steps:
                self.run_step()
                self.accounting.after_step(state.step)
                self._after_step()
        finally:
            self._close_batches()
        self.sync(agree=True)  # the epoch's last steps: a complete meter, and no NaN loss in its checkpoint
        state.train_metrics = self.accounting.epoch_metrics(self.parts.amp.skipped_steps)

    def _after_step(self) -> None:
        state, p = self.state, self.parts
        if p.ema is not None and state.step_result is not StepResult.SKIPPED:
            p.ema.update(p.model, state.step_skipped)  # ON_DEVICE: the flag keeps a skipped step out, without a read
        if state.step % self.options.log_every == 0:
            self.writer.train_step(state.step, self.read_loss(), p.optimizer.param_groups[0]["lr"])
        self.hooks.call("after_step", self)
        stopping = self.stop.agreed is not None
        periodic = self.checkpointer.is_periodic(state.step, state.batch, self.num_batches) and not self.out_of_steps  # the run's end saves it
        if stopping or periodic:
            self.checkpointer.save(self, Progress(state.epoch, state.batch, state.step), final=stopping)
        if stopping:
            raise Preempted(self.stop.agreed, str(self.checkpointer.last_path))

    def _validate(self) -> None:
        """The pending validation: evaluate, commit its outcome (record, best.pt), then log it and tell the hooks."""
        with rng_untouched():  # training draws the same after it, whether it ran now or before a resume
            self._run_validation()

    def _run_validation(self) -> None:
        validation = self.validator.run(self)
        record = {"epoch": validation.epoch, "step": self.state.step, "metrics": validation.metrics, "validator": self.validator.state_dict()}
        self.checkpointer.commit_validation(record, validation.is_best, self.dist.is_main)
        self.writer.evaluation("val", validation.epoch, self.state.step, validation.metrics)
        self.hooks.call("after_validation", self, validation.metrics)
        self.state.stop = self.state.stop or validation.should_stop

    def _start_epoch(self) -> LoopState:
        """Point the sampler at the epoch, skip the batches a resume had consumed (without loading them)."""
        loader, skip = self.parts.train_loader, self.state.batch
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.state.epoch)
        batches: Any = loader
        if skip and hasattr(sampler, "skip_first"):
            sampler.skip_first(skip * loader.batch_size)
        elif skip:
            log.warning("this loader cannot skip samples: reading and dropping %d batches", skip)
            batches = iter(loader)
            for _ in range(skip):
                next(batches)
        self.parts.model.train()
        self._batches = iter(batches)
        self.accounting.start_epoch()
        self.parts.optimizer.zero_grad(set_to_none=True)
        self.hooks.call("before_epoch", self)
        return self.state

    def _close_batches(self) -> None:
        # leaving an epoch early (step budget, preemption, an error) must stop a prefetch thread
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()
        else:
            stop_workers(self._batches)  # a loader without prefetching: its workers end now, not at garbage collection
        self._batches = None

    def run_step(self) -> None:
        """One optimizer step: forward, loss and backward over the micro-batches of one
        accumulation group (``train.accumulate``), then clip and step under amp. Reads nothing."""
        p, opt, state = self.parts, self.options, self.state
        # groups are aligned to multiples of K within the epoch; a shorter last group is divided by its own size
        group_start = state.batch - state.batch % opt.accumulate
        size = min(opt.accumulate, self.num_batches - group_start)
        count = group_start + size - state.batch
        for index in range(count):
            inputs, targets = next(self._batches)
            inputs, targets = to_device(inputs, self.dist.device), to_device(targets, self.dist.device)
            # DDP and FSDP reduce gradients on the group's last backward only
            last = index == count - 1
            with contextlib.nullcontext() if last else gradient_sync_off(p.model):
                with p.amp.autocast():
                    loss = p.criterion(self._forward(inputs), targets)
                self.accounting.record_micro_batch(loss, batch_size_of(inputs))
                p.amp.backward(self.accounting.poison_if_nonfinite(loss) / size)  # under skip a NaN loss leaves NaN gradients: the step skips itself
            state.batch += 1
        outcome = p.amp.apply_step(p.optimizer, self._clip, check_finite=self.nonfinite.skips)
        p.optimizer.zero_grad(set_to_none=True)
        self.accounting.end_step(state.epoch, state.step, outcome)
        state.step_result, state.step_skipped = outcome.result, outcome.found_inf if outcome.result is StepResult.ON_DEVICE else None
        if outcome.result is not StepResult.SKIPPED:
            p.scheduler.step()  # a step the device skipped is taken back at the next sync point (accounting.py)
        state.step += 1
        state.loss = loss.detach()

    def _forward(self, inputs: Any) -> Any:
        self._forwards += 1
        first = self._forwards == 1
        try:
            outputs = self.parts.model(inputs)
        except RuntimeError as err:  # bad input a forward finds: a channel mismatch (the first), DDP's unused parameters (later)
            converted = input_error(err) if first else unused_parameters_error(err, self.parts.model)
            if converted is err:
                raise
            raise converted from err
        if first:
            prediction = check_network_outputs(outputs, unwrap(self.parts.model), prediction_key(self.parts.criterion))
            check_output_classes(prediction, self.meta.num_classes, self.meta.classes)
        return outputs

    def test(self, loader: Any, epoch: int, on_batch: Optional[Callable[[Any, Any, Any], None]] = None) -> Dict[str, float]:
        """Evaluate the current weights on ``loader`` (the test split) as those of epoch ``epoch``;
        written as the test's row, then ``after_test`` hooks see the metrics."""
        self.state.epoch = epoch
        repeated = self.writer.recorded("test", self.state.step)  # a run resumed after its test: recorded once
        with self.writer.muted(repeated):
            results = self.evaluate(without_ddp(self.parts.model), loader, "test", on_batch)
            self.writer.evaluation("test", epoch, self.state.step, results)
            self.writer.flush()
            self.hooks.call("after_test", self, results)
        return results

    def close(self) -> None:
        """Release files, threads and signal handlers (also after an error)."""
        self.stop.restore()
        self.checkpointer.close()
        try:
            self.hooks.close()
        finally:
            self.writer.close()
