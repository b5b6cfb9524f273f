"""What the training steps leave on the device between sync points, read by the host in one go.

Reading a tensor's value makes the host wait until the device has finished all
queued work, so the loop never reads one per step: every micro-batch's loss
and every step's device-side skip decision stay on the device, and
``StepLog.read`` turns them into host values with a single ``tolist()`` at a
sync point (a log step, a checkpoint, the end of an epoch).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

import torch


@dataclass
class StepRecord:
    """One optimizer step, as the host learns it at the next sync point."""

    epoch: int
    step: int  # the step's index (``state.step`` before it was counted)
    losses: List[float] = field(default_factory=list)  # one per micro-batch
    samples: List[int] = field(default_factory=list)
    skipped: bool = False  # the update was not applied (overflow, or a non-finite loss under train.nonfinite=skip)
    deferred: bool = False  # decided on the device: the host counted the step as taken until now

    @property
    def bad_loss(self) -> Optional[float]:
        """The first non-finite micro-batch loss, or None."""
        return next((v for v in self.losses if not math.isfinite(v)), None)

    def finite_sum(self) -> Tuple[float, int]:
        """(sum of loss x samples, samples) over the finite micro-batch losses."""
        pairs = [(v * n, n) for v, n in zip(self.losses, self.samples) if math.isfinite(v)]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


class StepLog:
    """Per-step device values waiting for the next read."""

    def __init__(self) -> None:
        self._losses: List[torch.Tensor] = []
        self._flags: List[torch.Tensor] = []
        self._records: List[StepRecord] = []
        self._current = StepRecord(0, 0)

    def add_loss(self, loss: torch.Tensor, samples: int) -> None:
        """A micro-batch's loss (detached, still on the device)."""
        self._losses.append(loss.detach().reshape(()).float())
        self._current.samples.append(samples)

    def end_step(self, epoch: int, step: int, skipped: Union[bool, torch.Tensor]) -> None:
        """Close the step: ``skipped`` is a host bool, or a 0-dim device flag (1.0: skipped) read later."""
        record, self._current = self._current, StepRecord(0, 0)
        record.epoch, record.step = epoch, step
        if isinstance(skipped, torch.Tensor):
            record.deferred = True
            self._flags.append(skipped.detach().reshape(()).float())
        else:
            record.skipped = skipped
        self._records.append(record)

    def __len__(self) -> int:
        return len(self._records)

    def local_bad(self) -> Optional[torch.Tensor]:
        """1.0 on the device when any waiting loss is non-finite (for the ranks to agree on), else 0.0."""
        if not self._losses:
            return None
        return (~torch.isfinite(torch.stack(self._losses))).any().float()

    def read(self, extra: Optional[torch.Tensor] = None) -> Tuple[List[StepRecord], List[float]]:
        """The waiting steps with their values, and ``extra``'s values: one host read (none when nothing waits)."""
        parts = [torch.stack(self._losses)] if self._losses else []
        parts += [torch.stack(self._flags)] if self._flags else []
        parts += [extra.reshape(-1).float()] if extra is not None else []
        if not parts:
            return [], []
        device = parts[0].device
        values = torch.cat([p.to(device) for p in parts]).tolist()
        losses, values = values[: len(self._losses)], values[len(self._losses) :]
        flags, rest = values[: len(self._flags)], values[len(self._flags) :]
        for record in self._records:
            record.losses, losses = losses[: len(record.samples)], losses[len(record.samples) :]
            if record.deferred:
                record.skipped, flags = flags[0] > 0, flags[1:]
        records = self._records
        self._losses, self._flags, self._records = [], [], []
        return records, rest


class EpochMeter:
    """The training metrics of one epoch: mean loss over the applied steps, throughput, steps taken.

    A checkpoint inside an epoch keeps its sums (``state_dict``), so a run resumed there reports the epoch an
    uninterrupted run does, not only the part after the resume."""

    def __init__(self) -> None:
        self.loss_sum, self.samples, self.steps = 0.0, 0, 0
        self.epoch: Optional[int] = None  # the epoch of the steps added
        self.start = time.perf_counter()

    def add(self, record: StepRecord) -> None:
        total, samples = record.finite_sum()  # a non-finite loss would make the mean NaN
        self.loss_sum += total
        self.samples += samples
        self.steps += not record.skipped
        self.epoch = record.epoch

    def state_dict(self) -> Dict[str, Any]:
        seconds = time.perf_counter() - self.start
        return {
            "epoch": self.epoch,
            "loss_sum": self.loss_sum,
            "samples": self.samples,
            "steps": self.steps,
            "seconds": seconds,
        }

    @classmethod
    def resumed(cls, state: Dict[str, Any]) -> "EpochMeter":
        """The meter a checkpoint kept, its clock going on from the seconds it had measured."""
        meter = cls()
        meter.loss_sum, meter.samples, meter.steps = (
            float(state["loss_sum"]),
            int(state["samples"]),
            int(state["steps"]),
        )
        meter.epoch = state["epoch"]
        meter.start -= float(state["seconds"])
        return meter

    def result(self, skipped_steps: int) -> Dict[str, float]:
        elapsed = time.perf_counter() - self.start
        return {
            "loss": self.loss_sum / max(self.samples, 1),
            "samples_per_s": self.samples / elapsed if elapsed > 0 else math.nan,
            "steps": int(self.steps),  # counts print as counts (steps=19, not 19.0000)
            "skipped_steps": int(skipped_steps),
        }


class LossWindow:
    """The mean loss of the steps since the last log step (what ``train/loss`` shows)."""

    def __init__(self) -> None:
        self.total, self.samples = 0.0, 0

    def add(self, record: StepRecord) -> None:
        total, samples = record.finite_sum()
        self.total += total
        self.samples += samples

    def take(self) -> float:
        """The mean so far (NaN when every step since the last log step was non-finite); starts a new window."""
        mean = self.total / self.samples if self.samples else math.nan
        self.total, self.samples = 0.0, 0
        return mean

    def state_dict(self) -> Dict[str, Any]:
        """The sums of the steps since the last log step: a checkpoint between two log steps keeps them, so the
        first ``train/loss`` after a resume is the mean an uninterrupted run logs, not that of the steps since the resume."""
        return {"total": self.total, "samples": self.samples}

    @classmethod
    def resumed(cls, state: Dict[str, Any]) -> "LossWindow":
        window = cls()
        window.total, window.samples = float(state["total"]), int(state["samples"])
        return window
