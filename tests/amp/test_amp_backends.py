"""Mixed precision backends and policy: native or apex per device and dtype, each level's defaults (dtype, loss
scale, BatchNorm), one clear error without apex amp, and the calls the apex backend makes (on a stand-in)."""

import sys
import types

import pytest
import torch
from torch import nn

from utils.amp import Amp, apex_amp_available
from utils.amp.apex_backend import ApexAmp
from utils.config.load import load_config
from utils.config.schema import AmpConfig
from utils.errors import ConfigError

CPU = torch.device("cpu")


def fake_apex(monkeypatch):
    apex, apex_amp = types.ModuleType("apex"), types.ModuleType("apex.amp")
    apex.amp = apex_amp
    monkeypatch.setitem(sys.modules, "apex", apex)
    monkeypatch.setitem(sys.modules, "apex.amp", apex_amp)
    return apex_amp


def test_auto_backend_is_native_here_and_apex_only_with_apex_amp_on_cuda(monkeypatch):
    assert Amp(AmpConfig(opt_level="O2"), CPU).policy.backend == "native"
    fake_apex(monkeypatch)
    assert apex_amp_available()
    assert Amp(AmpConfig(opt_level="O2"), CPU).policy.backend == "native"  # apex amp is CUDA-only
    cuda = torch.device("cuda", 0)  # only the policy is resolved: no GPU needed
    amp = Amp(AmpConfig(opt_level="O2"), cuda)
    assert amp.policy.backend == "apex" and isinstance(amp.backend, ApexAmp)
    assert Amp(AmpConfig(opt_level="O2", dtype="bfloat16"), cuda).policy.backend == "native"  # apex has no bf16


@pytest.mark.skipif(apex_amp_available(), reason="apex.amp is installed here")
def test_apex_backend_without_apex_amp_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"apex >= 25.07 has no amp.*amp.backend=native"):
        Amp(AmpConfig(opt_level="O1", backend="apex"), CPU)


def test_policy_defaults_per_device_and_level():
    cuda = torch.device("cuda", 0)
    o1 = Amp(AmpConfig(opt_level="O1"), CPU).policy
    assert o1.dtype == torch.bfloat16 and o1.loss_scale is None
    assert Amp(AmpConfig(opt_level="O1", backend="native"), cuda).policy.dtype == torch.float16
    assert Amp(AmpConfig(opt_level="O1", backend="native"), cuda).policy.loss_scale == "dynamic"
    assert Amp(AmpConfig(opt_level="O2", dtype="float16"), CPU).policy.loss_scale == "dynamic"
    assert Amp(AmpConfig(opt_level="O3", dtype="float16"), CPU).policy.loss_scale is None
    assert Amp(AmpConfig(opt_level="O3", dtype="bfloat16", loss_scale="dynamic"), CPU).policy.loss_scale == "dynamic"
    assert Amp(AmpConfig(opt_level="O2", loss_scale=128.0), CPU).policy.loss_scale == 128.0
    assert Amp(AmpConfig(opt_level="O2"), CPU).policy.keep_batchnorm_fp32
    assert not Amp(AmpConfig(opt_level="O3"), CPU).policy.keep_batchnorm_fp32
    with pytest.raises(ConfigError, match="keep_batchnorm_fp32 applies to O2 and O3"):
        Amp(AmpConfig(opt_level="O1", keep_batchnorm_fp32=True), CPU)
    with pytest.raises(ConfigError, match="'amp.loss_scale' must be auto, dynamic or a finite number > 0, got -1.0"):
        load_config(overrides=["amp.loss_scale=-1"])
    assert load_config(overrides=["amp.loss_scale=1e30"]).amp.loss_scale == 1e30  # YAML reads 1e30 as a string
    with pytest.raises(ConfigError, match="'amp.loss_scale' must be auto, dynamic or a finite number"):
        load_config(overrides=["amp.loss_scale=big"])


def test_apex_backend_drives_apex_amp_calls(monkeypatch):
    """The apex path cannot run without a GPU build of apex; this checks its calls on a stand-in."""
    calls = []
    apex_amp = fake_apex(monkeypatch)
    apex_amp.initialize = lambda model, optimizer, **kw: calls.append(("initialize", kw)) or (model, optimizer)

    class ScaleLoss:
        def __init__(self, loss, optimizer):
            self.loss = loss

        def __enter__(self):
            calls.append(("scale_loss",))
            return self.loss * 4

        def __exit__(self, *exc):
            return False

    apex_amp.scale_loss = ScaleLoss
    apex_amp.master_params = lambda opt: [p for g in opt.param_groups for p in g["params"]]
    apex_amp.state_dict = lambda: {"loss_scaler0": {"loss_scale": 8.0}}
    apex_amp.load_state_dict = lambda state: calls.append(("load", state))
    amp = Amp(AmpConfig(opt_level="O2"), torch.device("cuda", 0))
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    amp.initialize(model, optimizer)
    assert calls[0] == (
        "initialize",
        {"opt_level": "O2", "verbosity": 0, "keep_batchnorm_fp32": True, "loss_scale": "dynamic"},
    )
    amp.backward(model(torch.ones(1, 3)).sum())
    assert ("scale_loss",) in calls and torch.equal(model.bias.grad, torch.tensor([4.0]))
    assert amp.step(optimizer) is True
    optimizer._amp_stash = types.SimpleNamespace(already_patched=True)  # apex's mark of an overflow
    optimizer.step = lambda: None
    assert amp.step(optimizer) is False and amp.skipped_steps == 1
    state = amp.state_dict()
    assert state["apex"] == {"loss_scaler0": {"loss_scale": 8.0}}
    amp.load_state_dict(state)
    assert calls[-1] == ("load", state["apex"])
