"""``optim.impl``: fused, foreach and loop optimizers take the same steps and load each other's state."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from utils.amp import Amp
from utils.config.schema import AmpConfig, OptimConfig
from utils.optim.impl import fused_supported, resolve_impl
from utils.optim.optimizers import build_optimizer
from utils.registry import NETWORKS

TOL = {"rtol": 1e-5, "atol": 1e-6}  # the kernels order their float operations differently


def net():
    torch.manual_seed(0)
    return NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [4, 8]})


def train(model, optimizer, steps, seed=0, amp=None):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        if amp is None:
            loss.backward()
            optimizer.step()
        else:
            amp.backward(loss)
            amp.step(optimizer)
        optimizer.zero_grad(set_to_none=True)


def flags(optimizer):
    return {(g["fused"], g["foreach"]) for g in optimizer.param_groups}


def test_auto_picks_fused_where_torch_has_it_for_the_device_and_dtype():
    params = list(net().parameters())
    assert fused_supported(params)  # torch >= 2.4 has fused CPU kernels
    assert resolve_impl("auto", params) == "fused"
    assert resolve_impl("auto", [torch.zeros(2, dtype=torch.int64)]) == "foreach"  # no fused kernel for integers


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
@pytest.mark.parametrize("impl", ["fused", "foreach"])
def test_weights_after_steps_equal_the_loop_implementation(name, impl):
    models = {which: net() for which in (impl, "loop")}
    optimizers = {which: build_optimizer(m, OptimConfig(name=name, lr=1e-2, impl=which)) for which, m in models.items()}
    assert flags(optimizers[impl]) == ({(True, None)} if impl == "fused" else {(None, True)})
    for which in models:
        train(models[which], optimizers[which], steps=5)
    start = net().state_dict()
    for key, value in models["loop"].state_dict().items():
        torch.testing.assert_close(models[impl].state_dict()[key], value, **TOL, msg=key)
        if value.is_floating_point() and key.endswith("weight"):
            assert not torch.equal(value, start[key])  # the steps moved the weights


@pytest.mark.parametrize("saved, loaded", [("fused", "loop"), ("loop", "fused"), ("foreach", "fused")])
def test_a_state_dict_loads_across_implementations_and_keeps_the_configured_one(saved, loaded):
    source = net()
    source_opt = build_optimizer(source, OptimConfig(name="adamw", lr=1e-2, impl=saved))
    train(source, source_opt, steps=3)
    target = copy.deepcopy(source)
    target_opt = build_optimizer(target, OptimConfig(name="adamw", lr=1e-2, impl=loaded))
    target_opt.load_state_dict(copy.deepcopy(source_opt.state_dict()))
    assert flags(target_opt) == flags(build_optimizer(net(), OptimConfig(impl=loaded)))  # not the saved run's flags
    train(source, source_opt, steps=2, seed=1)
    train(target, target_opt, steps=2, seed=1)
    for key, value in source.state_dict().items():
        torch.testing.assert_close(target.state_dict()[key], value, **TOL, msg=key)


def test_o2_master_weights_step_alike_with_fused_and_loop():
    runs = {}
    for impl in ("fused", "loop"):
        model = net()
        optimizer = build_optimizer(model, OptimConfig(name="adamw", lr=1e-2, impl=impl))
        amp = Amp(AmpConfig(opt_level="O2", dtype="bfloat16"), torch.device("cpu"))
        model, optimizer = amp.initialize(model, optimizer)
        train(model, optimizer, steps=4, amp=amp)
        runs[impl] = torch.cat([m.flatten() for _, m in amp.backend.masters.pairs])
    assert runs["fused"].dtype == torch.float32
    torch.testing.assert_close(runs["fused"], runs["loop"], **TOL)
