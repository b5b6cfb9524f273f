"""``model.channels_last``: NHWC weights and inputs give the contiguous model's outputs, gradients and training."""

from __future__ import annotations

import copy

import pytest
import torch

import main
from tests.conftest import fast_overrides
from utils.checkpoint.store import load_verified
from utils.data.prefetch import CudaPrefetcher, PrefetchLoader
from utils.model.memory_format import inputs_channels_last, to_channels_last
from utils.registry import NETWORKS

NHWC = torch.channels_last


def small_net():
    torch.manual_seed(0)
    return NETWORKS.build(
        "classifier", num_classes=10, backbone="small_cnn", backbone_args={"in_channels": 3, "widths": [8, 16]}
    )


def test_outputs_and_gradients_equal_the_contiguous_model():
    plain = small_net()
    nhwc = to_channels_last(copy.deepcopy(plain))
    convs = [p for p in nhwc.parameters() if p.dim() == 4]
    assert convs and all(p.is_contiguous(memory_format=NHWC) and not p.is_contiguous() for p in convs)
    x = torch.randn(6, 3, 16, 16)
    y = torch.randint(0, 10, (6,))
    outs = []
    for model, inputs in ((plain, x), (nhwc, inputs_channels_last(x))):
        out = model(inputs)
        torch.nn.functional.cross_entropy(out, y).backward()
        outs.append(out)
    assert inputs_channels_last(x).is_contiguous(memory_format=NHWC)
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-6)
    for (name, a), b in zip(plain.named_parameters(), nhwc.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)
    # the checkpoint is the same: same keys, same values, loads into a contiguous model
    fresh = small_net()
    fresh.load_state_dict(nhwc.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), nhwc.state_dict().values()))


@pytest.mark.parametrize("mode", ["none", "thread"])
def test_the_prefetcher_hands_out_nhwc_inputs_and_leaves_the_rest(mode):
    batches = [(torch.randn(2, 3, 4, 4), torch.zeros(2, 1, 4, 4), torch.tensor([0, 1]))]
    ((inputs, mask, labels),) = list(PrefetchLoader(batches, mode=mode, channels_last=True))
    assert inputs.is_contiguous(memory_format=NHWC) and not inputs.is_contiguous()
    assert mask.is_contiguous() and torch.equal(inputs, batches[0][0])
    clip = [(torch.randn(2, 3, 2, 4, 4), labels)]  # 5-D video clips keep their layout
    assert next(iter(PrefetchLoader(clip, mode=mode, channels_last=True)))[0].is_contiguous()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.cuda
def test_the_cuda_prefetcher_converts_on_its_copy_stream():
    device = torch.device("cuda", 0)
    batches = [(torch.randn(2, 3, 4, 4).pin_memory(), torch.tensor([0, 1]))]
    inputs, _ = next(iter(CudaPrefetcher(device, channels_last=True)(batches)))
    assert inputs.is_cuda and inputs.is_contiguous(memory_format=NHWC)


def test_a_channels_last_run_trains_like_a_contiguous_one(tmp_path):
    weights = {}
    for flag in ("false", "true"):
        assert main.main([*fast_overrides(tmp_path, f"cl_{flag}", epochs=1), f"model.channels_last={flag}"]) == 0
        weights[flag] = load_verified(tmp_path / f"cl_{flag}" / "latest" / "checkpoints" / "last.pt")["model"]
    for name, value in weights["false"].items():
        torch.testing.assert_close(weights["true"][name], value, rtol=1e-3, atol=1e-4, msg=name)
