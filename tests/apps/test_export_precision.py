"""--mode export of low-precision checkpoints: trained at O2 in bfloat16 (with train.ema and
model.channels_last too), the network exports in float32 from its evaluation weights and matches them.
ONNX refused the graph (InvalidGraph on bfloat16) and pt2 failed on a bfloat16 input."""

from __future__ import annotations

import json

import pytest
import torch

import main
from tests.apps.test_export import exported_outputs
from utils.checkpoint.state import Checkpoint
from utils.config.load import load_config
from utils.model.build import build_network

# bf16 is emulated, and slow, on this CPU: a narrow network, two steps, two digits
BASE = [
    "threads=1",
    "train.iterations=2",
    "model.args.backbone_args={widths: [4, 8]}",
    "data.args={classes: [0, 1]}",
    "amp.opt_level=O2",
    "amp.dtype=bfloat16",
]
VARIANTS = {"O2": [], "O2+ema+channels_last": ["train.ema={decay: 0.9}", "model.channels_last=true"]}


@pytest.fixture(scope="module", params=list(VARIANTS))
def low_precision(request, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("low_precision")
    assert main.main([f"experiment.output_root={out}", "experiment.name=lp", *BASE, *VARIANTS[request.param]]) == 0
    return {"checkpoint": out / "lp" / "run_001" / "checkpoints" / "best.pt", "variant": request.param}


def float32_reference(checkpoint: Checkpoint) -> torch.nn.Module:
    """The checkpoint's evaluation weights (the EMA's where the run kept one) in a float32 network."""
    cfg = load_config(base=checkpoint.config)
    network = build_network(cfg.model)
    network.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in checkpoint.eval_weights.items()})
    return network.eval()


@pytest.mark.parametrize("fmt", ["onnx", "pt2", "safetensors"])
def test_a_low_precision_checkpoint_exports_in_float32_and_matches_its_weights(low_precision, tmp_path, fmt, capsys):
    out = tmp_path / fmt
    assert (
        main.main(
            [
                "--mode",
                "export",
                "--checkpoint",
                str(low_precision["checkpoint"]),
                "--format",
                fmt,
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert "error" not in capsys.readouterr().err
    meta = json.loads((out / "model.json").read_text())
    assert meta["opt_level"] == "O2" and meta["exported_dtype"] == "float32" and meta["max_abs_difference"] <= 1e-4
    checkpoint = Checkpoint.load(str(low_precision["checkpoint"]))
    # the weights it exports from are low precision
    assert torch.bfloat16 in {v.dtype for v in checkpoint.eval_weights.values()}
    x = torch.rand(5, 1, 8, 8)  # float32, a batch size it was not traced with
    with torch.no_grad():
        got = exported_outputs(fmt, out, x, load_config(base=checkpoint.config))
        expected = float32_reference(checkpoint)(x)
    assert got.dtype == torch.float32 and (got - expected).abs().max().item() <= 1e-4
