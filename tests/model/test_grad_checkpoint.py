"""Gradient checkpointing: same gradients and BN statistics as without it, also under DDP."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from tests.conftest import ROOT, fast_overrides, subprocess_env
from utils.distributed.spawned import free_port
from utils.model.grad_checkpoint import frozen_running_stats, keep_running_stats_in_backward
from utils.registry import NETWORKS


def _pair():
    torch.manual_seed(0)
    plain = NETWORKS.build("classifier", num_classes=10, backbone_args={"widths": [8, 16, 16]}, dropout=0.2)
    ckpt = copy.deepcopy(plain)
    ckpt.set_grad_checkpointing(True)
    return plain, ckpt


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, seed: int) -> None:
    torch.manual_seed(seed)  # the same dropout masks for both networks
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()


def test_checkpointed_network_matches_plain_gradients_and_bn_stats():
    plain, ckpt = _pair()
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (plain, ckpt)]
    for step in range(3):
        x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
        for model, opt in zip((plain, ckpt), opts):
            _step(model, opt, x, y, seed=step)
        for (name, p), q in zip(plain.named_parameters(), ckpt.parameters()):
            assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6), name
        for opt in opts:
            opt.step()
    plain_buffers, ckpt_buffers = dict(plain.named_buffers()), dict(ckpt.named_buffers())
    assert any(name.endswith("num_batches_tracked") for name in plain_buffers)
    for name, value in plain_buffers.items():
        if name.endswith("num_batches_tracked"):
            assert int(value) == 3 and int(ckpt_buffers[name]) == 3, name  # one update per step, not two
        else:
            assert torch.allclose(value, ckpt_buffers[name], rtol=1e-5, atol=1e-6), name


def _saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x).sum().backward()
    return total


def test_checkpointing_saves_less_for_backward_in_training_only():
    plain, ckpt = _pair()
    x = torch.randn(8, 1, 16, 16)
    assert _saved_bytes(ckpt, x) < 0.5 * _saved_bytes(plain, x)
    ckpt.eval(), plain.eval()
    assert _saved_bytes(ckpt, x) == _saved_bytes(plain, x)  # eval: no checkpointing


def _minet(backbone: str, **backbone_args):
    torch.manual_seed(0)
    plain = NETWORKS.build(
        "minet", backbone=backbone, backbone_args=backbone_args, channels=8, sim_channels=8, head_channels=8
    )
    ckpt = copy.deepcopy(plain)
    ckpt.set_grad_checkpointing(True)
    return plain, ckpt


def _backbone_saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    storages = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        features = model.backbone(x)
    del features
    return sum(storages.values())


@pytest.mark.parametrize(
    "backbone, args, most",
    [
        ("resnet18", {}, 0.2),  # torchvision: Backbone.forward checkpoints each of the 5 stages
        # timm's own set_grad_checkpointing (its recomputation kept off the statistics by hooks); timm leaves the
        # first module (this model's 3-conv stem) and the last stage unchecked
        ("timm", {"model_name": "resnet10t"}, 0.8),
        pytest.param("vgg16_bn", {}, 0.2, marks=pytest.mark.slow),  # ~10 s on 2 cores
    ],
)
def test_checkpointed_minet_backbones_match_plain_gradients_and_bn_stats(backbone, args, most):
    plain, ckpt = _minet(backbone, **args)
    x, mask = torch.randn(2, 3, 32, 32), torch.rand(2, 1, 32, 32).round()
    # the backbone's own stages are checkpointed, not only MINet's decoder and AIM
    assert _backbone_saved_bytes(ckpt, x) < most * _backbone_saved_bytes(plain, x)
    for model in (plain, ckpt):
        nn.functional.binary_cross_entropy_with_logits(model(x), mask).backward()
    for (name, p), q in zip(plain.named_parameters(), ckpt.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6), name
    for (name, value), other in zip(plain.named_buffers(), ckpt.buffers()):
        # one forward's update of the running statistics (num_batches_tracked 1, not 2)
        assert torch.equal(value, other), name


def test_a_checkpoint_placed_elsewhere_leaves_the_stats_of_a_layer_used_twice_as_plain():
    """keep_running_stats_in_backward: checkpoint calls without the framework's context (timm's), here one
    BatchNorm in two checkpoints, each recomputation stopping early inside the layer."""
    torch.manual_seed(0)
    plain = nn.BatchNorm2d(3)
    ckpt = copy.deepcopy(plain)
    keep_running_stats_in_backward(ckpt)
    x = torch.randn(4, 3, 2, 2, requires_grad=True)
    plain(plain(x) * 2).sum().backward()
    checkpoint(ckpt, checkpoint(ckpt, x, use_reentrant=False) * 2, use_reentrant=False).sum().backward()
    for key, value in plain.state_dict().items():
        assert torch.equal(value, ckpt.state_dict()[key]), key  # num_batches_tracked 2: the two forwards'
    assert int(ckpt.num_batches_tracked) == 2


def test_frozen_running_stats_restores_after_an_error():
    bn = nn.BatchNorm2d(3)
    before = {k: v.clone() for k, v in bn.state_dict().items()}
    with pytest.raises(RuntimeError):
        with frozen_running_stats(bn):
            bn(torch.randn(4, 3, 2, 2) + 5)
            raise RuntimeError("stop early")
    for key, value in bn.state_dict().items():
        assert torch.equal(value, before[key]), key


def _ddp_run(out_root, name: str, *extra: str):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--master_port={free_port()}",
        "main.py",
        *fast_overrides(out_root, name, epochs=1),
        "dist.static_graph=false",
        "data.batch_size=32",
        *extra,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=200)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "marked ready twice" not in output
    return torch.load(out_root / name / "latest" / "checkpoints" / "last.pt", map_location="cpu", weights_only=False)


@pytest.mark.slow
@pytest.mark.timeout(440)
def test_grad_checkpointing_under_ddp_trains_like_plain_ddp(out_root):
    checkpointed = _ddp_run(out_root, "gc_ddp", "model.grad_checkpointing=true")
    plain = _ddp_run(out_root, "plain_ddp")
    steps = checkpointed["progress"]["step"]
    assert steps == plain["progress"]["step"] > 0
    for name, value in checkpointed["model"].items():
        if name.endswith("num_batches_tracked"):
            assert int(value) == steps, name  # the recomputation in backward did not count a second update
        # the same weights and BatchNorm statistics after an epoch of 2-rank DDP, to float rounding
        assert torch.allclose(value.float(), plain["model"][name].float(), rtol=1e-4, atol=1e-6), name
