"""A test-only dataset that records which training samples each rank reads, in order.

Loaded with ``custom_imports=[tests.distributed.recorded_digits]`` and ``data.name=recorded_digits``.
Two environment variables drive it (not config keys: resume guards compare ``data.args``):

- ``REGTRAIN_RECORD``: a path prefix; rank r appends every training index it reads, one per
  line, to ``<prefix>.rank<r>`` (line-buffered, so a SIGKILL loses nothing already read);
- ``REGTRAIN_KILL_AT``: rank 0 SIGKILLs its whole process group (the launcher and every rank)
  when it is about to read its N-th training sample: a kill -9 at a reproducible point.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Optional, TextIO, Tuple

import torch

from utils.data.datasets.digits import Digits
from utils.distributed.ops import get_rank
from utils.registry import DATASETS


@DATASETS.register("recorded_digits")
class RecordedDigits(Digits):
    def __init__(self, split: str = "train", **kwargs: Any) -> None:
        super().__init__(split, **kwargs)
        self.recording = split == "train"
        self.reads = 0
        self._file: Optional[TextIO] = None

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.recording:
            self._record(index)
        return super().__getitem__(index)

    def _record(self, index: int) -> None:
        self.reads += 1
        kill_at = int(os.environ.get("REGTRAIN_KILL_AT", "0"))
        if kill_at and self.reads >= kill_at and get_rank() == 0:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        prefix = os.environ.get("REGTRAIN_RECORD")
        if prefix:
            if self._file is None:
                self._file = open(f"{prefix}.rank{get_rank()}", "a", buffering=1)
            self._file.write(f"{index}\n")
