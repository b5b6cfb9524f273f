"""Two real gloo processes evaluating an odd-sized split give the single-process metrics
and, between them, write every prediction exactly as one process does."""

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.sod_dist_eval import TEST_COUNT, evaluate_split
from utils.distributed.spawned import free_port

pytestmark = pytest.mark.slow  # a torchrun evaluation


def read_pngs(folder):
    return {p.name: np.asarray(Image.open(p)) for p in sorted(folder.glob("*.png"))}


@pytest.mark.timeout(300)
def test_two_rank_evaluation_equals_one_process(tmp_path):
    single = evaluate_split(0, 1, tmp_path / "single")

    result = tmp_path / "dist.json"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(ROOT / "tests" / "fixtures" / "sod_dist_eval.py"),
        str(result),
        str(tmp_path / "dist"),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dist = json.loads(result.read_text())
    assert dist.pop("world_size") == 2
    assert set(dist) == set(single) >= {"mae", "max_f", "mean_f", "s_measure", "e_measure", "weighted_f", "loss"}
    for name, value in single.items():
        # metrics are float64 sums of per-image values; the loss is a float32 batch mean, and
        # the slices batch the images differently, so it agrees to float32 rounding only
        tolerance = 1e-6 if name == "loss" else 1e-9
        assert dist[name] == pytest.approx(value, rel=tolerance, abs=1e-12), name

    single_maps, dist_maps = read_pngs(tmp_path / "single"), read_pngs(tmp_path / "dist")
    assert len(single_maps) == TEST_COUNT and single_maps.keys() == dist_maps.keys()
    for name, saliency in single_maps.items():
        assert np.array_equal(saliency, dist_maps[name]), name
    assert len({m.shape for m in single_maps.values()}) > 1  # written at the differing original sizes
