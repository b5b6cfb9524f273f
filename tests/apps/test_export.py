"""--mode export: ONNX and torch.export files with a dynamic batch, and safetensors weights, that match the
checkpoint's network; export logs its own lines only; a full disk leaves no partial file."""

from __future__ import annotations

import json
import logging
import sys

import numpy as np
import pytest
import torch

import main
from tests.fixtures.outputs import one_error, partial_files, small_disk
from utils.checkpoint.state import Checkpoint
from utils.commands.checkpoint_network import checkpoint_network
from utils.commands.export import quiet_exporters
from utils.config.load import load_config
from utils.model.build import build_network

# its INFO lines
ONNXSCRIPT_CHATTER = (
    "unused nodes",
    "unused functions",
    "constant folding",
    "PassManager",
    "rewrite rules",
)


def exported_outputs(fmt: str, out, x: torch.Tensor, cfg) -> torch.Tensor:
    """What the exported file in ``out`` returns for ``x``, loaded as its users load it."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
        assert session.get_inputs()[0].type == "tensor(float)"
        return torch.from_numpy(session.run(None, {"input": x.numpy()})[0])
    if fmt == "pt2":
        return torch.export.load(str(out / "model.pt2")).module()(x)
    from safetensors.torch import load_file

    weights = load_file(str(out / "model.safetensors"))
    assert all(t.dtype == torch.float32 and t.is_contiguous() for t in weights.values() if t.is_floating_point())
    network = build_network(cfg.model)
    network.load_state_dict(weights)
    return network.eval()(x)


@pytest.mark.parametrize("fmt", ["onnx", "pt2", "safetensors"])
def test_exported_model_matches_the_network(trained, tmp_path, fmt, capsys):
    out = tmp_path / fmt
    assert (
        main.main(
            ["--mode", "export", "--checkpoint", str(trained["checkpoint"]), "--format", fmt, "--output", str(out)]
        )
        == 0
    )
    assert "max_abs_difference=" in capsys.readouterr().out
    meta = json.loads((out / "model.json").read_text())
    assert meta["max_abs_difference"] <= 1e-4 and meta["tolerance"] == 1e-4
    assert (
        meta["input_size"] == [1, 8, 8]
        and meta["classes"] == ["one", "two", "zero"]
        and meta["framework_version"] == "0.3.0"
    )

    checkpoint = Checkpoint.load(str(trained["checkpoint"]))
    network, _ = checkpoint_network(load_config(base=checkpoint.config), checkpoint, torch.device("cpu"))
    x = torch.rand(5, 1, 8, 8)  # a batch size it was not traced with
    with torch.no_grad():
        eager = network.eval()(x)
        got = exported_outputs(fmt, out, x, load_config(base=checkpoint.config))
    assert np.abs((got - eager).detach().numpy()).max() <= 1e-4
    assert meta["file"] == f"model.{fmt}" and sorted(p.name for p in out.iterdir()) == sorted(
        ["config.yaml", "log.txt", "model.json", f"model.{fmt}"]
    )


def test_export_logs_its_own_lines_only(trained, tmp_path, capsys):
    """onnxscript's graph passes logged about 11 INFO lines into the console and the run's log.txt."""
    assert (
        main.main(["--mode", "export", "--checkpoint", str(trained["checkpoint"]), "--output", str(tmp_path / "x")])
        == 0
    )
    err, log_text = capsys.readouterr().err, (tmp_path / "x" / "log.txt").read_text()
    assert not [
        line for line in (err + log_text).splitlines() if any(chatter in line for chatter in ONNXSCRIPT_CHATTER)
    ], err
    assert "exported " in log_text


def test_quiet_exporters_keeps_warnings_and_restores_the_levels(caplog):
    logger = logging.getLogger("onnxscript.optimizer")
    before = logging.getLogger("onnxscript").level
    with caplog.at_level(logging.INFO), quiet_exporters():
        logger.info("Removed 56 unused nodes")
        logger.warning("a real problem")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("onnxscript")] == ["a real problem"]
    assert logging.getLogger("onnxscript").level == before


@pytest.mark.parametrize("fmt", ["onnx", "pt2", "safetensors"])
def test_a_full_disk_is_one_line_with_exports_advice_and_no_partial_file(trained, tmp_path, fmt, capsys):
    """It was a raw traceback and left a 0-byte model file."""
    with small_disk(tmp_path / "disk", "16k") as disk:
        out = disk / "out"
        assert (
            main.main(
                ["--mode", "export", "--checkpoint", str(trained["checkpoint"]), "--format", fmt, "--output", str(out)]
            )
            == 2
        )
        error = one_error(capsys)
        assert error.startswith(
            f"error: could not write '{out / ('model.' + fmt)}' (No space left on device); free disk space or fix the permissions of its folder, "
        )
        assert error.endswith("then run the export again (into a new or empty --output, or without --output)"), error
        assert partial_files(disk) == [] and not out.exists()  # a start without a result leaves no folder


def test_onnx_without_the_extra_is_one_line_naming_the_install(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if it were not installed
    assert (
        main.main(["--mode", "export", "--checkpoint", str(trained["checkpoint"]), "--output", str(tmp_path / "x")])
        == 2
    )
    # the console log is on stderr too
    (err,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert err.startswith("error: ") and 'pip install -e ".[export]"' in err
