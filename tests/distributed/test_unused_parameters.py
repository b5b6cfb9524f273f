"""Parameters that get no gradient under 2-rank DDP: one line naming them and the fix, or training with the fix."""

from __future__ import annotations

import re
from typing import List, Tuple

import pytest
import torch
from torch import nn

from tests.fixtures.dist_utils import run, spawn, torchrun
from utils.distributed.unused import reduced_parameter_names, unused_parameters_error

SPARE = [
    "experiment.name=spare",
    "custom_imports=[tests.fixtures.unused_net]",
    "model.name=spare_layer_classifier",
    "model.args.backbone_args={widths: [8]}",
    "data.batch_size=32",
    "train.iterations=3",
    "train.log_every=1",
]


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_unused_parameters_under_ddp_are_one_line_naming_them_and_the_fix(tmp_path):
    proc = run(torchrun(2, f"experiment.output_root={tmp_path}", *SPARE), timeout=180)
    errors = [line for line in proc.stderr.splitlines() if re.match(r"(\[rank\d\] )?error:", line)]
    assert proc.returncode != 0 and errors, proc.stderr[-3000:]
    for line in errors:  # each rank that got to print says the same
        assert re.search(
            r"parameter\(s\) spare\.weight, spare\.bias of the network received no gradient on rank \d", line
        ), line
        assert "dist.find_unused_parameters=true" in line and "model.freeze" in line, line
    assert len({line.split("]")[0] for line in errors}) == len(errors), "one line per rank"
    root_cause = proc.stderr.split("Root Cause (first observed failure):", 1)[-1]
    assert "exitcode  : 2" in root_cause and "ConfigError" in root_cause, proc.stderr[-3000:]
    # the ranks print their line, not a traceback (torchrun's summary shows the one it recorded)
    assert not re.search(r"\[rank\d\] failed", proc.stderr), proc.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_same_run_trains_with_find_unused_parameters(tmp_path):
    proc = run(
        torchrun(2, f"experiment.output_root={tmp_path}", *SPARE, "dist.find_unused_parameters=true"), timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "replicas identical on 2 rank(s)" in (tmp_path / "spare" / "latest" / "log.txt").read_text()


class Tangled(nn.Module):
    """Parameters DDP orders in its own way: one on the root module, one shared by two layers, frozen ones."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.first = nn.Linear(3, 3)
        self.frozen = nn.Linear(3, 3).requires_grad_(False)
        self.second = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
        self.second[1].weight = self.first.weight  # shared: DDP reduces it once


def ddp_names(rank: int, world_size: int) -> Tuple[List[str], bool]:
    ddp = nn.parallel.DistributedDataParallel(Tangled())
    names = reduced_parameter_names(ddp)
    by_name = dict(ddp.module.named_parameters(remove_duplicate=False))
    reduced = ddp._build_params_for_reducer()[0]  # the list the indices in DDP's error count in
    return names, len(names) == len(reduced) and all(by_name[n] is p for n, p in zip(names, reduced))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_parameter_indices_are_named_in_ddp_s_own_order(tmp_path):
    names, same_order = spawn(ddp_names, 2, tmp_path)[0]
    assert same_order, names
    assert names == ["scale", "first.weight", "first.bias", "second.0.weight", "second.0.bias", "second.1.bias"]


def test_other_errors_are_returned_unchanged_and_debug_names_are_used():
    other = RuntimeError("mat1 and mat2 shapes cannot be multiplied")
    assert unused_parameters_error(other, nn.Linear(1, 1)) is other
    debug = RuntimeError(
        "Expected to have finished reduction in the prior iteration before starting a new one. ...\n"
        "Parameters which did not receive grad for rank 1: head.extra.weight, head.extra.bias\n"
    )
    assert str(unused_parameters_error(debug, nn.Linear(1, 1))).startswith(
        "parameter(s) head.extra.weight, head.extra.bias of the network received no gradient on rank 1"
    )
