"""One optimizer step of the training loop: ``Trainer.run_step`` (``trainer.py``) runs a ``TrainStep``.

Forward, loss and backward over the micro-batches of one accumulation group
(``train.accumulate``), then clip and step under amp. It reads nothing from the device:
the loss and the step's outcome go to the step accounting (``accounting.py``), which
reads them at the next sync point. The first forward's outputs are checked against the
criterion and the data's classes; a forward's ``RuntimeError`` that bad input explains
becomes that ``UserError``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from utils.amp import ClipOptions, StepResult
from utils.data.batch import batch_size_of, to_device
from utils.distributed.fsdp import gradient_sync_off
from utils.distributed.parallel import unwrap
from utils.distributed.process_group import DistInfo
from utils.distributed.unused import unused_parameters_error
from utils.engine.accounting import StepAccounting
from utils.engine.input_check import check_output_classes, input_error
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.trainer_types import LoopOptions, LoopState, Parts, RunMeta
from utils.model.outputs import check_network_outputs, prediction_key


class TrainStep:
    """The optimizer steps of one run over ``parts``: ``run`` takes the next one."""

    def __init__(
        self,
        parts: Parts,
        loop: LoopOptions,
        dist: DistInfo,
        meta: RunMeta,
        accounting: StepAccounting,
        nonfinite: NonFinitePolicy,
    ) -> None:
        self.parts, self.options, self.dist, self.meta = parts, loop, dist, meta
        self.accounting, self.nonfinite = accounting, nonfinite
        self._forwards = 0
        self._clip = ClipOptions(loop.clip_grad_norm, loop.clip_grad_value)

    def run(self, state: LoopState, batches: Iterator[Any], num_batches: int) -> None:
        """One optimizer step: forward, loss and backward over the micro-batches of one accumulation
        group from ``batches`` (of an epoch of ``num_batches``), then clip and step under amp; ``state``
        moves on by the batches and the step. Reads nothing."""
        p, opt = self.parts, self.options
        # groups are aligned to multiples of K within the epoch; a shorter last group is divided by its own size
        group_start = state.batches_done - state.batches_done % opt.accumulate
        size = min(opt.accumulate, num_batches - group_start)
        count = group_start + size - state.batches_done
        for index in range(count):
            inputs, targets = next(batches)
            inputs, targets = to_device(inputs, self.dist.device), to_device(targets, self.dist.device)
            # DDP and FSDP reduce gradients on the group's last backward only
            last = index == count - 1
            with contextlib.nullcontext() if last else gradient_sync_off(p.model):
                with p.amp.autocast():
                    loss = p.criterion(self._forward(inputs), targets)
                self.accounting.record_micro_batch(loss, batch_size_of(inputs))
                # under skip a NaN loss leaves NaN gradients: the step skips itself
                p.amp.backward(self.accounting.poison_if_nonfinite(loss) / size)
            state.batches_done += 1
        outcome = p.amp.apply_step(p.optimizer, self._clip, check_finite=self.nonfinite.skips)
        p.amp.zero_grad(p.optimizer)
        self.accounting.end_step(state.epoch, state.step, outcome)
        state.step_result, state.step_skipped = (
            outcome.result,
            outcome.found_inf if outcome.result is StepResult.ON_DEVICE else None,
        )
        if outcome.result is not StepResult.SKIPPED:
            p.scheduler.step()  # a step the device skipped is taken back at the next sync point (accounting.py)
        state.step += 1
        state.loss = loss.detach()

    def _forward(self, inputs: Any) -> Any:
        self._forwards += 1
        first = self._forwards == 1
        try:
            outputs = self.parts.model(inputs)
        # bad input a forward finds: a channel mismatch (the first), DDP's unused parameters (later)
        except RuntimeError as err:
            converted = input_error(err) if first else unused_parameters_error(err, self.parts.model)
            if converted is err:
                raise
            raise converted from err
        if first:
            prediction = check_network_outputs(outputs, unwrap(self.parts.model), prediction_key(self.parts.criterion))
            check_output_classes(prediction, self.meta.num_classes, self.meta.classes)
        return outputs
