"""CPU SyncBN over 2 gloo processes equals one BatchNorm over the whole batch in one process."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
import torch
from torch import nn

from tests.fixtures.dist_utils import spawn
from utils.distributed.ops import all_reduce_sums
from utils.distributed.sync_bn import CPUSyncBatchNorm, convert_batchnorm

# (rows per rank, feature shape after N, momentum)
CASES: List[Tuple[Sequence[int], Tuple[int, ...], Optional[float]]] = [
    ((6, 6), (3, 5, 4), 0.1),  # halves, images
    ((9, 3), (3, 5, 4), 0.1),  # unequal halves
    ((1, 11), (4,), None),  # one row on a rank, flat features, cumulative running average
]
STEPS = 2
TOL = 1e-5


def problem(case: int) -> Dict[str, Any]:
    """The global batches, loss weights and affine parameters of ``case`` (the same in every process)."""
    sizes, shape, momentum = CASES[case]
    gen = torch.Generator().manual_seed(case)
    n, c = sum(sizes), shape[0]
    return {
        "xs": [torch.randn(n, *shape, generator=gen) * 3 + 1.5 for _ in range(STEPS)],
        "rs": [torch.randn(n, *shape, generator=gen) for _ in range(STEPS)],  # loss = sum(y * r)
        "weight": torch.rand(c, generator=gen) + 0.5,
        "bias": torch.randn(c, generator=gen),
        "momentum": momentum,
        "bounds": [sum(sizes[:r]) for r in range(len(sizes) + 1)],
    }


def run_bn(bn: nn.Module, p: Dict[str, Any], lo: int, hi: int) -> Dict[str, Any]:
    """Two training steps on rows lo:hi, then one eval forward; everything a comparison needs."""
    with torch.no_grad():
        bn.weight.copy_(p["weight"])
        bn.bias.copy_(p["bias"])
    steps = []
    for x, r in zip(p["xs"], p["rs"]):
        x = x[lo:hi].clone().requires_grad_()
        y = bn(x)
        (y * r[lo:hi]).sum().backward()
        steps.append({"y": y.detach(), "dx": x.grad, "dw": bn.weight.grad.clone(), "db": bn.bias.grad.clone()})
        bn.zero_grad(set_to_none=True)
    bn.eval()
    with torch.no_grad():
        eval_y = bn(p["xs"][0][lo:hi])
    return {
        "steps": steps,
        "eval_y": eval_y,
        "running_mean": bn.running_mean.clone(),
        "running_var": bn.running_var.clone(),
        "tracked": int(bn.num_batches_tracked),
    }


def _rank_main(rank: int, world_size: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {"cases": []}
    for case in range(len(CASES)):
        p = problem(case)
        bn = CPUSyncBatchNorm(p["weight"].numel(), momentum=p["momentum"])
        out["cases"].append(run_bn(bn, p, p["bounds"][rank], p["bounds"][rank + 1]))
    # rank 1 evaluated nothing: it still joins the reduction and gets rank 0's sums
    out["sums"] = all_reduce_sums({"count": torch.tensor(3.0), "hist": torch.tensor([1.0, 2.0])} if rank == 0 else {})
    return out


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> List[Dict[str, Any]]:
    return spawn(_rank_main, 2, tmp_path_factory.mktemp("sync_bn"))


def plain_bn(p: Dict[str, Any]) -> nn.Module:
    """torch's BatchNorm for the input rank of problem ``p``."""
    cls = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[p["xs"][0].ndim]
    return cls(p["weight"].numel(), momentum=p["momentum"])


def reference(case: int) -> Dict[str, Any]:
    p = problem(case)
    return run_bn(plain_bn(p), p, 0, p["bounds"][-1])


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{s[0]}+{s[1]}" for s, _, _ in CASES])
def test_two_ranks_equal_one_batchnorm_over_the_global_batch(ranks, case):
    ref = reference(case)
    got = [r["cases"][case] for r in ranks]
    for step in range(STEPS):
        want = ref["steps"][step]
        torch.testing.assert_close(torch.cat([g["steps"][step]["y"] for g in got]), want["y"], atol=TOL, rtol=0)
        torch.testing.assert_close(torch.cat([g["steps"][step]["dx"] for g in got]), want["dx"], atol=TOL, rtol=0)
        # weight/bias gradients are per-rank sums; DDP adds them up (here: by hand)
        torch.testing.assert_close(sum(g["steps"][step]["dw"] for g in got), want["dw"], atol=TOL, rtol=0)
        torch.testing.assert_close(sum(g["steps"][step]["db"] for g in got), want["db"], atol=TOL, rtol=0)
    for g in got:  # the same running statistics on every rank, those of the global batch (unbiased var)
        torch.testing.assert_close(g["running_mean"], ref["running_mean"], atol=TOL, rtol=0)
        torch.testing.assert_close(g["running_var"], ref["running_var"], atol=TOL, rtol=0)
        assert g["tracked"] == ref["tracked"] == STEPS
    torch.testing.assert_close(torch.cat([g["eval_y"] for g in got]), ref["eval_y"], atol=TOL, rtol=0)
    # a per-rank BatchNorm would differ: the unequal split makes local statistics far from global ones
    p = problem(case)
    hi = p["bounds"][1]
    if hi > 1:
        local = plain_bn(p)
        with torch.no_grad():
            local.weight.copy_(p["weight"])
            local.bias.copy_(p["bias"])
        assert not torch.allclose(local(p["xs"][0][:hi]), ref["steps"][0]["y"][:hi], atol=1e-3)


@pytest.mark.slow
def test_a_rank_with_no_sums_still_takes_part_in_the_reduction(ranks):
    for r in ranks:
        assert set(r["sums"]) == {"count", "hist"}
        assert r["sums"]["count"].item() == 3.0 and r["sums"]["hist"].tolist() == [1.0, 2.0]


def test_one_process_is_plain_batchnorm():
    p = problem(0)
    got = run_bn(CPUSyncBatchNorm(3), p, 0, p["bounds"][-1])
    want = reference(0)
    for step in range(STEPS):
        for key in ("y", "dx", "dw", "db"):
            torch.testing.assert_close(got["steps"][step][key], want["steps"][step][key], atol=TOL, rtol=0)
    torch.testing.assert_close(got["running_var"], want["running_var"], atol=TOL, rtol=0)


def test_conversion_keeps_parameters_buffers_and_checkpoint_keys():
    from utils.registry import NETWORKS

    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    model.backbone.stages[1][0][1].eval()
    params = dict(model.named_parameters())
    keys = list(model.state_dict())
    converted = convert_batchnorm(model, CPUSyncBatchNorm)
    bns = [m for m in converted.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert bns and all(type(m) is CPUSyncBatchNorm for m in bns)
    assert list(converted.state_dict()) == keys
    assert all(params[name] is p for name, p in converted.named_parameters())  # the optimizer may already hold them
    assert not converted.backbone.stages[1][0][1].training and converted.backbone.stages[0][0][1].training
    plain = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    plain.load_state_dict(converted.state_dict())  # a SyncBN checkpoint loads into plain BatchNorm
