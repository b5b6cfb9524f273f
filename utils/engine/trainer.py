"""The Trainer: a short loop of ``run_step`` calls; hooks do everything else.

Read top to bottom, one run is::

    before_train
    for each epoch from state.epoch (a resume continues inside it, after state.batch batches):
        before_epoch
        until the epoch's batches are consumed (or train.iterations is reached):
            run_step      forward + loss + backward over one accumulation group, then the optimizer step
            after_step    EMA, logging, preemption, checkpoints every N steps
        after_epoch       logging, validation (best epoch, early stopping), the epoch's checkpoint
    after_train

The built-in hooks (``utils/engine/hooks/``) and the users' (``hook/``) are
called in the order of ``utils/hook.py``.

The loop reads no tensor value between sync points: every ``train.log_every``
steps (the log steps), before every checkpoint and at the end of each epoch it
reads what the steps left on the device in one go (``sync``, see
``step_log.py``); under DDP the ranks also agree, every ``train.sync_every``
steps (default: ``log_every``), on stop requests (preemption) and non-finite
losses, in one small all-reduce. On a GPU the host thus queues step after step
without waiting for the device.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import torch
from torch import nn

from utils.amp import Amp, ClipOptions
from utils.checkpoint.state import Checkpoint, StateObjects
from utils.data.batch import batch_size_of, to_device
from utils.distributed.parallel import unwrap, without_ddp
from utils.distributed.preempt import Preempted
from utils.distributed.unused import unused_parameters_error
from utils.engine.evaluate import evaluate
from utils.engine.hook_list import HookList
from utils.engine.input_check import check_output_classes, input_error
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.sync import HostSync
from utils.metrics.base import Metric

log = logging.getLogger(__name__)


@dataclass
class Parts:
    """The trainer's collaborators, built by ``main.py``.

    Training needs the optimizer, scheduler and train loader; evaluation the
    metric (and validation the val loader); test mode only model, criterion,
    amp and metric.
    """

    model: nn.Module  # possibly wrapped in DDP
    criterion: Callable[[Any, Any], torch.Tensor]
    amp: Amp
    optimizer: Optional[torch.optim.Optimizer] = None
    scheduler: Optional[Any] = None
    train_loader: Optional[Any] = None  # a loader, or any sized iterable of (inputs, targets)
    val_loader: Optional[Any] = None
    metric: Optional[Metric] = None
    ema: Optional[Any] = None  # a ModelEma; the ema hook updates it, validation evaluates it


@dataclass
class LoopOptions:
    """The loop's settings, as plain values (``main.py`` fills them from the config)."""

    epochs: int = 1
    step_limit: Optional[int] = None  # a step budget (train.iterations)
    accumulate: int = 1
    clip_grad_norm: Optional[float] = None
    clip_grad_value: Optional[float] = None
    nonfinite: str = "stop"
    max_nonfinite_skips: int = 10
    log_every: int = 10  # steps between reads of the loss (train.log_every)
    sync_every: Optional[int] = None  # steps between agreements of the ranks (train.sync_every; None: log_every)
    device: torch.device = torch.device("cpu")
    is_main: bool = True  # rank 0: writes files, shows progress
    world_size: int = 1
    config: Dict[str, Any] = field(default_factory=dict)  # the resolved config, saved in checkpoints
    classes: Optional[List[Any]] = None  # the training data's class list, saved in checkpoints
    num_classes: Optional[int] = None  # the training data's number of classes: the first batch's outputs must cover it


@dataclass
class LoopState:
    """Where training is, and what hooks tell the loop and each other."""

    epoch: int = 0  # the current epoch (0-based)
    batch: int = 0  # batches of the current epoch consumed so far
    step: int = 0  # optimizer steps so far, skipped ones (overflow, non-finite loss) included
    step_taken: Optional[bool] = False  # whether the last step changed the weights; None: the device decided (step_skipped)
    step_skipped: Optional[torch.Tensor] = None  # with step_taken None: 0-dim flag on the device, 1.0 where the update was skipped
    loss: Optional[torch.Tensor] = None  # the last micro-batch's loss, on the device (trainer.read_loss() for logs)
    train_metrics: Dict[str, float] = field(default_factory=dict)  # the last epoch's (after_epoch)
    stop: bool = False  # set by a hook: end training after this epoch (early stopping)
    stop_request: int = 0  # a signal a hook received; under DDP the ranks agree on it at sync points
    preempted: Optional[int] = None  # the signal (0: a peer's) all ranks stop for: checkpoint, then stop
    is_best: bool = False  # set by validation in after_epoch: this epoch is the new best
    last_checkpoint: Optional[str] = None  # set by the checkpoint hook


class Trainer:
    """Trains ``parts.model`` with ``options``; ``hooks`` add checkpoints, validation, logging, ..."""

    def __init__(self, parts: Parts, options: LoopOptions, hooks: Sequence[Any] = ()) -> None:
        self.parts, self.options = parts, options
        self.hooks = HookList(hooks)
        self.state = LoopState()
        # taken once: a resumable sampler's len() shrinks while it skips a resumed epoch's first batches
        self.num_batches = len(parts.train_loader) if parts.train_loader is not None else 0
        self.nonfinite = NonFinitePolicy(options.nonfinite, options.max_nonfinite_skips)
        self._batches: Optional[Iterator[Any]] = None
        self._forwards = 0
        self._clip = ClipOptions(options.clip_grad_norm, options.clip_grad_value)
        self.host = HostSync(self.nonfinite, options.world_size, options.log_every, options.sync_every)

    # -- what hooks ask ---------------------------------------------------------------------

    @property
    def out_of_steps(self) -> bool:
        """Whether the step budget (``train.iterations``) is used up."""
        return self.options.step_limit is not None and self.state.step >= self.options.step_limit

    @property
    def finished(self) -> bool:
        """Whether the current epoch is the last one."""
        return self.state.epoch + 1 >= self.options.epochs or self.out_of_steps

    def state_objects(self) -> StateObjects:
        """What a checkpoint holds the state of (see ``utils/checkpoint/state.py``)."""
        p = self.parts
        return StateObjects(
            model=unwrap(p.model), optimizer=p.optimizer, scheduler=p.scheduler, amp=p.amp, ema=p.ema,
            sampler=getattr(p.train_loader, "sampler", None), loop={"nonfinite": self.nonfinite}, hooks=self.hooks.stateful(),
        )

    def evaluate(self, model: nn.Module, loader: Any, on_batch: Optional[Callable[[Any, Any, Any], None]] = None, split: Optional[str] = None) -> Dict[str, float]:
        """``model``'s metrics on ``loader``, reduced exactly over all ranks; with ``split``
        (val, val_ema, test) the hooks' ``after_eval_batch`` see every batch."""
        p = self.parts
        if split is not None:
            on_batch = self.hooks.batch_listener(self, split, loader, on_batch)
        return evaluate(model, loader, p.criterion, p.metric, p.amp, self.options.device, self.options.is_main, on_batch)

    # -- the loop ---------------------------------------------------------------------------

    def restore(self, checkpoint: Checkpoint, rank: int, same_data: bool = True) -> None:
        """Continue from ``checkpoint``: every object's state, this rank's random state, the position.

        With ``same_data`` False (``--resume-force`` over a changed data config) the
        interrupted epoch restarts from its first batch.
        """
        checkpoint.restore(self.state_objects(), rank, self.options.world_size)
        progress = checkpoint.progress
        self.state.epoch, self.state.batch, self.state.step = progress.epoch, progress.batch, progress.step
        if progress.batch and not same_data:
            log.warning("the data or world size changed (--resume-force): epoch %d restarts from its first batch", progress.epoch)
            self.state.batch = 0
        log.info("training state restored: epoch %d, step %d", progress.epoch, progress.step)

    def fit(self) -> None:
        """Train from ``state`` (a fresh start or a restored checkpoint) to the end.

        Raises Preempted after the checkpoint a SIGTERM/SIGINT asked for is written.
        """
        state = self.state
        self.hooks.call("before_train", self)
        while state.epoch < self.options.epochs and not state.stop and not self.out_of_steps:
            self._start_epoch()
            self.hooks.call("before_epoch", self)
            try:
                while state.batch < self.num_batches and not self.out_of_steps:
                    self.run_step()
                    if self.host.due(state.step):
                        self.sync(agree=self.host.agrees(state.step))
                    self.hooks.call("after_step", self)
                    if state.preempted is not None:
                        raise Preempted(state.preempted, state.last_checkpoint)
            finally:
                self._close_batches()
            self.sync(agree=True)  # the epoch's last steps: a complete meter, and no NaN loss in its checkpoint
            state.train_metrics = self.host.meter.result(self.parts.amp.skipped_steps)
            self.hooks.call("after_epoch", self)
            state.epoch, state.batch = state.epoch + 1, 0
        self.hooks.call("after_train", self)

    def _start_epoch(self) -> None:
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
        self.host.new_epoch()
        self.parts.optimizer.zero_grad(set_to_none=True)

    def _close_batches(self) -> None:
        # leaving an epoch early (step budget, preemption, an error) must stop a prefetch thread
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()
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
            inputs, targets = to_device(inputs, opt.device), to_device(targets, opt.device)
            # DDP reduces gradients on the group's last backward only
            last = index == count - 1
            with contextlib.nullcontext() if last or not hasattr(p.model, "no_sync") else p.model.no_sync():
                with p.amp.autocast():
                    loss = p.criterion(self._forward(inputs), targets)
                self.host.steps.add_loss(loss, batch_size_of(inputs))
                p.amp.backward(self.nonfinite.guard(loss) / size)  # under skip a NaN loss leaves NaN gradients: the step skips itself
            state.batch += 1
        outcome = p.amp.apply_step(p.optimizer, self._clip, check_finite=self.nonfinite.skips)
        p.optimizer.zero_grad(set_to_none=True)
        decided_on_device = outcome.taken is None
        self.host.steps.end_step(state.epoch, state.step, outcome.found_inf if decided_on_device else not outcome.taken)
        state.step_taken, state.step_skipped = outcome.taken, outcome.found_inf if decided_on_device else None
        if outcome.taken is not False:
            p.scheduler.step()  # a step the device skipped is taken back at the next sync (HostSync)
        state.step += 1
        state.loss = loss.detach()

    # -- sync points: the only places the loop reads tensor values (utils/engine/sync.py) -------

    def sync(self, agree: bool = False) -> None:
        """Read and replay what the steps since the last sync left on the device (one host read);
        with ``agree`` the ranks also agree on stop requests and NaN losses. Hooks call it before
        anything that must see every step (the checkpoint hook does). May raise NonFiniteError."""
        self.host.sync(self.state, self.parts, agree)

    def read_loss(self) -> float:
        """The mean training loss of the steps since the previous call: what the logs show (one read per step at most)."""
        return self.host.read_loss(self.state, self.parts)

    def _forward(self, inputs: Any) -> Any:
        self._forwards += 1
        if self._forwards > 1:
            try:
                return self.parts.model(inputs)
            except RuntimeError as err:  # DDP: parameters without a gradient in the last backward, a config fix
                converted = unused_parameters_error(err, self.parts.model)
                if converted is err:
                    raise
                raise converted from err
        try:
            outputs = self.parts.model(inputs)
        except RuntimeError as err:  # the run's first batch: a channel mismatch is bad input, not a bug
            converted = input_error(err)
            if converted is err:
                raise
            raise converted from err
        check_output_classes(outputs, self.options.num_classes)
        return outputs

    def test(self, loader: Any, epoch: int, on_batch: Optional[Callable[[Any, Any, Any], None]] = None) -> Dict[str, float]:
        """Evaluate the current weights on ``loader`` (the test split) as those of epoch ``epoch``; ``after_test`` hooks see the metrics."""
        self.state.epoch = epoch
        results = self.evaluate(without_ddp(self.parts.model), loader, on_batch, split="test")
        self.hooks.call("after_test", self, results)
        return results

    def close(self) -> None:
        """Let every hook release its files and threads (also after an error)."""
        self.hooks.close()
