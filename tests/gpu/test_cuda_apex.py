"""NVIDIA apex (a build before 25.07, which still ships ``apex.amp``) on a real GPU: amp.backend=apex at
O1 and O2 and apex's DistributedDataParallel, each against the native backend on the same run.

apex is never a dependency (the PyPI package named apex is another project): these tests run where
such a build is importable and are skipped elsewhere.
"""

from __future__ import annotations

import re

import pytest

from tests.gpu.runs import digits, launch, needs_cuda
from utils.amp.policy import apex_amp_available

pytestmark = [
    needs_cuda,
    pytest.mark.skipif(not apex_amp_available(), reason="needs an apex build with apex.amp (before 25.07)"),
    pytest.mark.cuda,
    pytest.mark.slow,
]

RESNET = "digits_resnet18.yaml"


def _loss(line: str) -> float:
    return float(re.search(r"loss=([-\w.+]+)", line).group(1))


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_apex_backend_trains_like_the_native_one(tmp_path, level):
    lines = {}
    for backend in ("native", "apex"):
        ran = launch(digits(tmp_path, backend, f"amp.opt_level={level}", f"amp.backend={backend}", config=RESNET))
        lines[backend] = ran.test_line()
        assert f"amp {level} ({backend})" in ran.out, ran.out[-3000:]
    # same data, seed and level: the test losses agree to within what fp16 rounding moves in one epoch
    assert abs(_loss(lines["apex"]) - _loss(lines["native"])) < 0.25 * _loss(lines["native"]) + 0.05, lines


def test_apex_distributed_data_parallel(tmp_path):
    ran = launch(digits(tmp_path, "apex_ddp", "dist.mode=apex", "amp.opt_level=O1", config=RESNET), nproc=1)
    ran.test_line()
