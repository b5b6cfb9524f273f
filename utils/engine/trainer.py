"""The Trainer: ``fit()`` calls the built-in services in one visible order; hooks extend it.

One run, as ``fit`` reads::

    checkpointer.prepare, before_train
    a resumed run first finishes the validation its checkpoint left pending
    for each epoch from state.epoch (a resume continues inside it, after state.batches_done batches):
        before_epoch
        until the epoch's batches are consumed (or train.iterations is reached):
            run_step       forward + loss + backward over one accumulation group, then the optimizer step;
                           rank 0 notes the step's samples (train.record_samples: samples.jsonl, written
                           at log steps and before every checkpoint)
            accounting     a sync point when due (log steps; under DDP the ranks' agreement)
            EMA            follows the weights when the step was taken
            writer         train/loss and train/lr at log steps
            after_step     hooks
            checkpointer   every train.checkpoint_every_steps steps; when the ranks agreed to stop, then Preempted
        writer (the epoch's training metrics), after_epoch hooks; the validator marks the epoch pending when due
        checkpointer       the epoch's checkpoint, always BEFORE its validation
        validator          the pending validation: evaluate, commit (record + best.pt), writer,
                           after_validation hooks; early stopping
    checkpointer.finish, after_train; returns a TrainResult (the best checkpoint, its epoch and value)

The services get what they need when the trainer builds them (``Services`` holds their
settings): the checkpointer the objects a checkpoint holds, the validator the trainer's
``evaluate``; no service reaches back into the trainer. A resume's start point is applied by
``start_from``, in one place. Hooks (``utils/hook/``) run by priority; they read ``trainer.state``,
``parts``, ``dist``, ``meta`` and ``writer``. The loop reads no tensor value between
sync points (``accounting.py``): on a GPU the host queues step after step.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Optional, Sequence

from torch import nn

from utils.amp import StepResult
from utils.checkpoint.rng import rng_untouched
from utils.checkpoint.snapshot import RunRecord, StateObjects
from utils.checkpoint.start_point import StartPoint
from utils.checkpoint.state import Progress
from utils.distributed.ops import decided_by_rank0
from utils.distributed.parallel import unwrap, without_ddp
from utils.distributed.preempt import Preempted
from utils.distributed.process_group import DistInfo
from utils.engine.accounting import StepAccounting
from utils.engine.checkpointer import Contents, NoCheckpointer
from utils.engine.epoch_batches import close_batches, epoch_batches
from utils.engine.evaluate import evaluate
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.sample_record import SampleRecorder
from utils.engine.stop import StopSignal
from utils.engine.train_step import TrainStep
from utils.engine.trainer_types import LoopOptions, LoopState, Parts, RunMeta, Services, TrainResult
from utils.engine.validator import NoValidator, Scoring
from utils.hook.hook_list import HookList
from utils.optim.schedules import rewind


class Trainer:
    """Trains ``parts.model`` with ``loop``; ``services`` are the built-in behaviours, ``hooks`` the added ones."""

    def __init__(
        self,
        parts: Parts,
        loop: LoopOptions,
        services: Optional[Services] = None,
        hooks: Sequence[Any] = (),
        dist: Optional[DistInfo] = None,
        meta: Optional[RunMeta] = None,
    ) -> None:
        services = services or Services()  # a harness: no files, no checkpoints, no validation
        self.parts, self.options, self.dist, self.meta = parts, loop, dist or DistInfo(), meta or RunMeta()
        self.hooks = HookList(hooks)
        self.state = LoopState()
        # taken once: a resumable sampler's len() shrinks while it skips a resumed epoch's first batches
        self.num_batches = len(parts.train_loader) if parts.train_loader is not None else 0
        self.nonfinite = NonFinitePolicy(loop.nonfinite, loop.max_nonfinite_skips)
        self.stop = StopSignal(self.dist.world_size)
        self.accounting = StepAccounting(
            self.nonfinite, self.stop, loop.log_every, loop.sync_every or 0, parts.amp.scales_loss
        )
        self._watch_skipped_steps()
        self._batches: Optional[Iterator[Any]] = None
        self.train_step = TrainStep(parts, loop, self.dist, self.meta, self.accounting, self.nonfinite)
        self.writer = services.writer
        self.samples = SampleRecorder(services.samples, parts.train_loader, self.dist.world_size)
        scoring = Scoring(self.evaluate, parts.model, parts.ema.module if parts.ema is not None else None)
        self.validator = services.validation.build(scoring) if services.validation is not None else NoValidator()
        run = RunRecord(self.meta.config, self.dist.world_size, self.meta.classes, self.meta.data)
        contents = Contents(self.state_objects, run, self.dist, lambda: self.sync(agree=True))
        self.checkpointer = (
            services.checkpoints.build(contents) if services.checkpoints is not None else NoCheckpointer()
        )

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
        # the validator's names the best file; the accounting's the sums of an epoch a checkpoint cuts
        loop = {"nonfinite": self.nonfinite, "validator": self.validator, "accounting": self.accounting}
        return StateObjects(
            model=unwrap(p.model),
            optimizer=p.optimizer,
            scheduler=p.scheduler,
            amp=p.amp,
            ema=p.ema,
            loop=loop,
            hooks=self.hooks.stateful(),
        )

    def evaluate(
        self, model: nn.Module, loader: Any, split: str, on_batch: Optional[Callable[[Any, Any, Any], None]] = None
    ) -> Dict[str, float]:
        """``model``'s metrics on ``loader``, reduced exactly over all ranks; the hooks' ``after_eval_batch``
        see every batch of ``split`` (val, val_ema, test)."""
        p, listener = self.parts, self.hooks.batch_listener(self, split, loader, on_batch)
        return evaluate(model, loader, p.criterion, p.metric, p.amp, self.dist.device, self.dist.is_main, listener)

    def sync(self, agree: bool = False) -> None:
        """Read and replay what the steps since the last sync left on the device (one host read); with
        ``agree`` the ranks also agree on stop requests and NaN losses. May raise NonFiniteError."""
        self.accounting.sync(self.state.step, agree)

    def read_loss(self) -> float:
        """The mean training loss of the steps since the previous call: what the logs show (one read per step at most)."""
        return self.accounting.read_loss(self.state.step)

    def start_from(self, start: StartPoint) -> None:
        """Continue from a resumed checkpoint, in this one place (``utils/checkpoint/start_point.py``): the training
        state into the parts (the weights are in already), the position, the records rewound to its step (the run
        writer's, samples.jsonl), and the validator's state (with the best file the checkpointer keeps) as the
        validation after it left them: from the validation record when there is one."""
        objects = self.state_objects()  # the validator's state is applied below, as of its validation record
        objects.loop.pop("validator")
        start.load_state(objects, self.dist.rank, self.dist.world_size)
        self.state.move_to(start.progress)
        self.writer.resume_at(start.step)
        self.samples.resume_at(start.step)
        if start.validator:  # an older checkpoint may have none (a 0.1 run saved before its first validation)
            self.validator.load_state_dict(start.validator)
        record = start.record
        if record is not None and not self.writer.recorded("val", record.step):
            # a crash between the record and its metrics.jsonl row
            self.writer.evaluation("val", record.epoch, record.step, record.metrics)
        best = start.best.file
        if self.validator.retracked:  # another eval.monitor: never compare two metrics
            self.validator.retrack(decided_by_rank0(lambda: self.writer.evaluations("val")))
            best = self.validator.tracker.file = self.checkpointer.file_validated_at(self.validator.tracker.epoch)
        self.checkpointer.resumed_from(start.path, best)

    # -- the loop -----------------------------------------------------------------------------

    def fit(self) -> TrainResult:
        """Train from ``state`` (a fresh start, or ``start_from`` a checkpoint) to the end; the best checkpoint.

        Finish the validation a resumed checkpoint left pending; then, per epoch, train, checkpoint,
        validate; then finish. Raises Preempted after the checkpoint a SIGTERM/SIGINT asked for is written.
        """
        self._begin()
        self._validate()  # a resumed run's: its checkpoint was written before that validation finished
        while self._epochs_left():
            self._train_epoch()
            # the next epoch, unless the step budget ended this one
            position = self.state.progress.rolled_over(self.num_batches)
            # BEFORE the validation: a failing one loses no training; named after the epoch that ended
            self._checkpoint(position, named=self.state.progress)
            self._validate()
            self.state.move_to(position)
        return self._finish()

    def _begin(self) -> None:
        self.checkpointer.prepare()
        self.stop.install()
        self.hooks.call("before_train", self)

    def _epochs_left(self) -> bool:
        return self.state.epoch < self.options.epochs and not self.state.stop and not self.out_of_steps

    def _finish(self) -> TrainResult:
        self.checkpointer.finish()
        self.hooks.call("after_train", self)
        tracker = self.validator.tracker
        return TrainResult(self.checkpointer.best_path(), self.validator.monitor, tracker.value, tracker.epoch)

    def _train_epoch(self) -> None:
        """The epoch's steps (those the step budget leaves), its metrics logged; then its validation may be due."""
        state = self._start_epoch()
        try:
            while state.batches_done < self.num_batches and not self.out_of_steps:
                self.run_step()
                self.accounting.sync_if_due(state.step)
                self._finish_step()
        finally:
            close_batches(self._batches)
            self._batches = None
        self.sync(agree=True)  # the epoch's last steps: a complete meter, and no NaN loss in its checkpoint
        state.train_metrics = self.accounting.epoch_metrics(self.parts.amp.skipped_steps)
        self.writer.train_epoch(state.epoch, state.step, state.train_metrics)
        self.hooks.call("after_epoch", self)
        self.validator.epoch_trained(state.epoch, last=state.epoch + 1 >= self.options.epochs or self.out_of_steps)

    def _finish_step(self) -> None:
        """After a step: the EMA follows it, the log line, the hooks' ``after_step``, then a periodic or a preemption's checkpoint."""
        state, p = self.state, self.parts
        if p.ema is not None and state.step_result is not StepResult.SKIPPED:
            p.ema.update(p.model, state.step_skipped)  # ON_DEVICE: the flag keeps a skipped step out, without a read
        if state.step % self.options.log_every == 0:
            self.samples.flush()
            self.writer.train_step(state.step, self.read_loss(), p.optimizer.param_groups[0]["lr"])
        self.hooks.call("after_step", self)
        # the run's end saves it
        periodic = (
            self.checkpointer.is_periodic(state.step, state.batches_done, self.num_batches) and not self.out_of_steps
        )
        if periodic or self.stop.agreed is not None:
            self._checkpoint(state.progress)

    def _checkpoint(self, position: Progress, named: Optional[Progress] = None) -> None:
        """The checkpoint of ``position`` (its file named after ``named``: ``Checkpointer.save``); when the ranks
        agreed to stop (at the last sync point), Preempted after it."""
        stopping = self.stop.agreed is not None
        self.samples.flush()  # before: a checkpoint never covers a step samples.jsonl lacks
        self.checkpointer.save(position, final=stopping, named=named)
        if stopping:
            raise Preempted(self.stop.agreed, str(self.checkpointer.last_path))

    def _validate(self) -> None:
        """The validation the validator has pending, if any: evaluate, commit its outcome (record, best.pt),
        log it, tell the hooks (which see the epoch it validates); then early stopping."""
        epoch = self.validator.pending
        if epoch is not None:
            # training draws the same, whether it ran now or before a resume
            with (
                rng_untouched(),
                self.state.showing_epoch(epoch),
            ):
                validation = self.validator.run_pending(self.state.step, self.checkpointer.last_path)
                self.checkpointer.commit_validation(validation)
                self.writer.evaluation("val", validation.epoch, validation.step, validation.metrics)
                self.hooks.call("after_validation", self, validation.metrics)
        # also a resumed run that had stopped early
        self.state.stop = self.state.stop or self.validator.should_stop

    def _start_epoch(self) -> LoopState:
        """Point the sampler at the epoch, skip the batches a resume had consumed (without loading them)."""
        self.parts.model.train()
        self._batches = epoch_batches(self.parts.train_loader, self.state.epoch, self.state.batches_done)
        self.accounting.start_epoch(self.state.epoch)
        self.parts.amp.zero_grad(self.parts.optimizer)
        self.hooks.call("before_epoch", self)
        return self.state

    def run_step(self) -> None:
        """One optimizer step: forward, loss and backward over the micro-batches of one
        accumulation group (``train.accumulate``), then clip and step under amp (``train_step.py``); rank 0
        records the group's samples (``train.record_samples``). Reads nothing."""
        first = self.state.batches_done
        self.train_step.run(self.state, self._batches, self.num_batches)
        self.samples.step(self.state.epoch, self.state.step, first, self.state.batches_done)

    def test(
        self, loader: Any, epoch: int, on_batch: Optional[Callable[[Any, Any, Any], None]] = None
    ) -> Dict[str, float]:
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
        self.stop.uninstall()
        self.checkpointer.close()
        try:
            self.hooks.close()
        finally:
            self.samples.flush()  # a failed run's last steps too: which samples led to the failure
            self.writer.close()
