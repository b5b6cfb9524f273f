"""Mixed precision with real dtypes on CPU: O0 unchanged, O2 master weights, loss scaling, clipping and accumulation, state.

(Which backend runs and the policy each level and device gets: tests/amp/test_amp_backends.py.)
"""

import pytest
import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from utils.amp import Amp, LossScaler
from utils.amp.native import NativeAmp
from utils.checkpoint.files import atomic_save
from utils.checkpoint.readers import load_file
from utils.config.schema import AmpConfig
from utils.registry import NETWORKS

CPU = torch.device("cpu")


def make(opt_level="O0", lr=0.1, optim="sgd", seed=0, **amp_cfg):
    """A small conv net with BatchNorm, an optimizer and an initialized Amp."""
    torch.manual_seed(seed)
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    params = [
        {"params": [p for n, p in model.named_parameters() if p.ndim > 1]},
        {"params": [p for n, p in model.named_parameters() if p.ndim <= 1]},
    ]
    optimizer = torch.optim.SGD(params, lr=lr) if optim == "sgd" else torch.optim.AdamW(params, lr=lr)
    amp = Amp(AmpConfig(opt_level=opt_level, **amp_cfg), CPU)
    model, optimizer = amp.initialize(model, optimizer)
    return model, optimizer, amp


def batch(seed=1, n=16):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)


def forward_backward(model, amp, x, y, divide=1):
    with amp.autocast():
        loss = nn.functional.cross_entropy(model(x), y)
    amp.backward(loss / divide)
    return loss


def train_steps(model, optimizer, amp, steps, clip=None):
    for i in range(steps):
        forward_backward(model, amp, *batch(seed=i))
        amp.step(optimizer, clip)
        optimizer.zero_grad(set_to_none=True)


def flat(tensors):
    return torch.cat([t.detach().float().flatten() for t in tensors])


def snapshot(tensors):
    return [t.detach().clone() for t in tensors]


# ---- O0: unchanged ---------------------------------------------------------------------------


def test_o0_is_the_plain_fp32_loop_bit_for_bit():
    model, optimizer, amp = make("O0", dtype="float16", loss_scale=128.0)
    assert isinstance(amp.backend, NativeAmp) and amp.backend.scaler is None and amp.backend.masters is None
    assert not model._forward_pre_hooks and not model._forward_hooks
    train_steps(model, optimizer, amp, 3, clip=0.5)
    ref, ref_opt, _ = make("O0")
    for i in range(3):
        x, y = batch(seed=i)
        nn.functional.cross_entropy(ref(x), y).backward()
        nn.utils.clip_grad_norm_([p for g in ref_opt.param_groups for p in g["params"]], 0.5)
        ref_opt.step()
        ref_opt.zero_grad()
    for a, b in zip(model.state_dict().values(), ref.state_dict().values()):
        assert torch.equal(a, b)


# ---- O2 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_o2_low_precision_model_fp32_masters_and_model_equals_rounded_masters(dtype):
    low = getattr(torch, dtype)
    model, optimizer, amp = make("O2", dtype=dtype, optim="adamw", lr=1e-2)
    backbone, head = model.backbone, model.head
    for module in model.modules():
        for p in module.parameters(recurse=False):
            assert p.dtype == (torch.float32 if isinstance(module, _BatchNorm) else low)
        for b in module.buffers(recurse=False):
            if b.is_floating_point():
                assert b.dtype == (torch.float32 if isinstance(module, _BatchNorm) else low)
    opt_params = [p for g in optimizer.param_groups for p in g["params"]]
    assert all(p.dtype == torch.float32 for p in opt_params)
    pairs = amp.backend.masters.pairs
    assert {id(m) for _, m in pairs} <= {id(p) for p in opt_params}
    assert not any(p is m for p, m in pairs) and len(pairs) == sum(p.dtype == low for p in model.parameters())
    x, y = batch()
    assert model(x).dtype == torch.float32  # inputs cast at the entry, outputs back to fp32
    before = snapshot(m for _, m in pairs)
    train_steps(model, optimizer, amp, 3)
    assert model.backbone is backbone and model.head is head
    for (param, master), old in zip(pairs, before):
        assert master.dtype == torch.float32 and not torch.equal(master, old)
        assert torch.equal(param, master.to(low))


def test_o2_training_follows_the_fp32_run():
    ref, ref_opt, ref_amp = make("O0")
    model, optimizer, amp = make("O2")
    init = snapshot(ref.parameters())
    train_steps(ref, ref_opt, ref_amp, 5)
    train_steps(model, optimizer, amp, 5)
    masters = {id(p): m for p, m in amp.backend.masters.pairs}
    o2 = flat(masters.get(id(p), p) for p in model.parameters())
    fp32, start = flat(ref.parameters()), flat(init)
    # the O2 weights moved the way fp32 moved them, up to bf16 rounding of the gradients
    assert torch.linalg.vector_norm(o2 - fp32) < 0.1 * torch.linalg.vector_norm(fp32 - start)


# ---- loss scaling ------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_fp16_injected_inf_skips_exactly_that_step_and_halves_the_scale(level):
    model, optimizer, amp = make(level, dtype="float16", optim="adamw", lr=1e-2)
    train_steps(model, optimizer, amp, 2)
    scale, skipped = amp.backend.loss_scale, amp.skipped_steps
    weights = snapshot(model.parameters())  # BatchNorm running stats do move: the forward ran
    opt_weights = snapshot(p for g in optimizer.param_groups for p in g["params"])
    opt_state = {k: snapshot(v.values()) for k, v in enumerate(optimizer.state.values())}
    forward_backward(model, amp, *batch(seed=7))
    next(p for p in model.parameters() if p.grad is not None).grad.view(-1)[0] = float("inf")
    assert amp.step(optimizer) is False
    optimizer.zero_grad(set_to_none=True)
    assert amp.backend.loss_scale == scale / 2 and amp.skipped_steps == skipped + 1
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), weights))
    assert all(torch.equal(a, b) for a, b in zip((p for g in optimizer.param_groups for p in g["params"]), opt_weights))
    assert all(
        torch.equal(a, b) for k, v in enumerate(optimizer.state.values()) for a, b in zip(v.values(), opt_state[k])
    )
    forward_backward(model, amp, *batch(seed=8))
    assert amp.step(optimizer) is True  # the next clean step is taken at the halved scale
    assert amp.backend.loss_scale == scale / 2 and amp.skipped_steps == skipped + 1
    assert not all(torch.equal(a, b) for a, b in zip(model.parameters(), weights))


def test_dynamic_scale_grows_after_clean_steps_and_static_never_changes():
    scaler = LossScaler(init_scale=8.0, growth_interval=3)
    for finite, expected in [(True, 8), (True, 8), (True, 16), (False, 8), (True, 8), (True, 8), (True, 16)]:
        scaler.update(finite)
        assert scaler.scale == expected
    static = LossScaler.from_setting(64.0)
    grads = [torch.tensor([64.0, float("nan")], dtype=torch.float16)]
    assert static.unscale_(grads) is False
    static.update(False)
    assert static.scale == 64.0 and grads[0][0].item() == 1.0


def test_loss_scale_and_masters_survive_a_checkpoint_round_trip(tmp_path):
    model, optimizer, amp = make("O2", dtype="float16", optim="adamw", lr=1e-2)
    train_steps(model, optimizer, amp, 2)
    forward_backward(model, amp, *batch(seed=7))
    next(p for p in model.parameters() if p.grad is not None).grad.view(-1)[0] = float("nan")
    amp.step(optimizer)
    optimizer.zero_grad()
    atomic_save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "amp": amp.state_dict()}, tmp_path / "c.pt"
    )
    state = load_file(tmp_path / "c.pt")
    fresh, fresh_opt, fresh_amp = make("O2", dtype="float16", optim="adamw", lr=1e-2, seed=5)
    assert fresh_amp.backend.loss_scale == 2.0**16
    fresh.load_state_dict(state["model"])
    fresh_opt.load_state_dict(state["optimizer"])
    fresh_amp.load_state_dict(state["amp"])
    assert fresh_amp.backend.loss_scale == amp.backend.loss_scale == 2.0**15 and fresh_amp.skipped_steps == 1
    for (_, a), (_, b) in zip(amp.backend.masters.pairs, fresh_amp.backend.masters.pairs):
        assert torch.equal(a, b)
    train_steps(model, optimizer, amp, 2)
    train_steps(fresh, fresh_opt, fresh_amp, 2)
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b), "the resumed run diverged from the uninterrupted one"


# ---- clipping and accumulation at every level --------------------------------------------------


def test_clipping_under_o2_fp16_uses_the_unscaled_gradient_norm():
    model, optimizer, amp = make("O2", dtype="float16", loss_scale=1024.0)
    forward_backward(model, amp, *batch())
    unscaled = [p.grad.float() / 1024.0 for p in model.parameters() if p.grad is not None]
    true_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in unscaled])).item()
    assert amp.step(optimizer, clip_grad_norm=true_norm / 4) is True
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    assert all(g.dtype == torch.float32 for g in grads)
    clipped = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
    assert clipped == pytest.approx(true_norm / 4, rel=1e-3)  # on scaled grads it would be true_norm / 4 / 1024


@pytest.mark.parametrize(
    "level,dtype", [("O1", "bfloat16"), ("O1", "float16"), ("O2", "bfloat16"), ("O2", "float16"), ("O3", "bfloat16")]
)
def test_accumulated_unscaled_gradients_match_the_fp32_gradients(level, dtype):
    ref, ref_opt, ref_amp = make("O0", lr=0.0)
    model, optimizer, amp = make(level, dtype=dtype, lr=0.0)
    for net, net_amp in ((ref, ref_amp), (model, amp)):
        for part in range(2):  # two micro-batches, each loss divided by 2, as the engine accumulates
            forward_backward(net, net_amp, *batch(seed=part), divide=2)
    assert ref_amp.step(ref_opt, clip_grad_norm=1e6) is True
    assert amp.step(optimizer, clip_grad_norm=1e6) is True
    ref_grads = flat(p.grad for g in ref_opt.param_groups for p in g["params"])
    grads = flat(p.grad for g in optimizer.param_groups for p in g["params"])
    assert nn.functional.cosine_similarity(ref_grads, grads, dim=0) > 0.99
    assert torch.linalg.vector_norm(grads).item() == pytest.approx(torch.linalg.vector_norm(ref_grads).item(), rel=0.02)
