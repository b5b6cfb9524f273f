"""Trying data code once before training (a transform list, one sample) without changing what training draws.

A check that runs random transforms draws from torch's generator; a dataset's
``__getitem__`` may also draw from python's or numpy's. Training must draw the
same numbers with the check as without it (the exact-resume promise), so the
trial runs inside ``torch.random.fork_rng`` and python's and numpy's states are
put back as they were; nothing is seeded.
"""

from __future__ import annotations

import contextlib
import random
from typing import Iterator

import numpy as np
import torch


@contextlib.contextmanager
def drawing_nothing() -> Iterator[None]:
    """Run the body with every generator it may draw from put back afterwards (torch's CPU generator
    forked; CUDA's untouched: data code runs on the CPU)."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
