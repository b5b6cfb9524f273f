"""--mode export: ONNX and torch.export files with a dynamic batch that match the checkpoint's network."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch

import main
from utils.checkpoint.state import Checkpoint
from utils.config import load_config
from utils.engine.test_mode import checkpoint_network


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_exported_model_matches_the_network(trained, tmp_path, fmt, capsys):
    out = tmp_path / fmt
    assert main.main(["--mode", "export", "--checkpoint", str(trained["checkpoint"]), "--format", fmt, "--output", str(out)]) == 0
    assert "max_abs_difference=" in capsys.readouterr().out
    meta = json.loads((out / "model.json").read_text())
    assert meta["max_abs_difference"] <= 1e-4 and meta["tolerance"] == 1e-4
    assert meta["input_size"] == [1, 8, 8] and meta["classes"] == ["one", "two", "zero"] and meta["framework_version"] == "0.3.0"

    checkpoint = Checkpoint.load(str(trained["checkpoint"]))
    network, _ = checkpoint_network(load_config(base=checkpoint.config), checkpoint, torch.device("cpu"))
    x = torch.rand(5, 1, 8, 8)  # a batch size it was not traced with
    with torch.no_grad():
        eager = network.eval()(x)
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
        got = torch.from_numpy(session.run(None, {"input": x.numpy()})[0])
    else:
        got = torch.export.load(str(out / "model.pt2")).module()(x)
    assert np.abs((got - eager).detach().numpy()).max() <= 1e-4


def test_onnx_without_the_extra_is_one_line_naming_the_install(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if it were not installed
    assert main.main(["--mode", "export", "--checkpoint", str(trained["checkpoint"]), "--output", str(tmp_path / "x")]) == 2
    (err,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # the console log is on stderr too
    assert err.startswith("error: ") and 'pip install -e ".[export]"' in err
