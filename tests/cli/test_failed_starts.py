"""What a checkpoint's saved config may not choose, and what a failed start leaves behind.

A checkpoint's config never imports code (its ``custom_imports`` are named again to be imported) and never
chooses where a run writes (a checkpoint in a run folder writes beside that run). A run folder this process
made that bad input stopped before any result goes again (``latest`` as before); one holding a checkpoint
stays. ``--output`` never takes a name the run layout keeps for its own folders."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch

import main
from tests.conftest import fast_overrides

MARKER = "tests.fixtures.import_marker"


def errors_of(capsys) -> List[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    return [line for line in err.splitlines() if line.startswith("error:")]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """best.pt of a 2-step digits run in <root>/t/run_001."""
    out = tmp_path_factory.mktemp("trained")
    assert main.main([*fast_overrides(out, "t", epochs=1), "train.iterations=2", "threads=1"]) == 0
    return out / "t" / "run_001" / "checkpoints" / "best.pt"


def saved_with(base: Path, target: Path, **config: Dict[str, Any]) -> Path:
    """A copy of ``base`` at ``target`` whose saved config has the sections ``config`` replaced."""
    data = torch.load(base, weights_only=True)
    data["config"].update(config)
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(data, target)
    return target


def test_a_checkpoint_s_custom_imports_are_not_imported_unless_named_again(base, tmp_path, capsys):
    """They were imported by --mode test (custom_imports=['this'] ran the module)."""
    file = saved_with(base, tmp_path / "runs" / "e" / "run_001" / "checkpoints" / "best.pt", custom_imports=[MARKER])
    sys.modules.pop(MARKER, None)
    try:
        assert main.main(["--mode", "test", "--checkpoint", str(file)]) == 0
        assert MARKER not in sys.modules
        log = (tmp_path / "runs" / "e" / "test_001" / "log.txt").read_text()
        assert f"the checkpoint's config names custom_imports ['{MARKER}'], which --mode test does not import" in log
        assert f"custom_imports=[{MARKER}]" in log
        assert main.main(["--mode", "test", "--checkpoint", str(file), f"custom_imports=[{MARKER}]"]) == 0
        assert MARKER in sys.modules  # named again by the user: imported
        assert "does not import" not in (tmp_path / "runs" / "e" / "test_002" / "log.txt").read_text()
    finally:
        sys.modules.pop(MARKER, None)


def test_an_unknown_network_of_a_checkpoint_names_its_custom_imports(base, tmp_path, capsys):
    model = {**torch.load(base, weights_only=True)["config"]["model"], "name": "net_of_a_plugin"}
    file = saved_with(base, tmp_path / "x.pt", custom_imports=[MARKER], model=model)
    assert main.main(["--mode", "predict", "--checkpoint", str(file), "--input", str(tmp_path)]) == 2
    (line,) = errors_of(capsys)
    assert line.startswith("error: unknown network 'net_of_a_plugin'")
    assert f"the checkpoint's config names custom_imports ['{MARKER}'], which --mode predict does not import" in line
    assert line.endswith(f"import them with custom_imports=[{MARKER}] (an override, or in --config)")
    assert not (tmp_path / "output").exists()


def test_a_checkpoint_never_chooses_where_test_mode_writes(base, tmp_path, monkeypatch):
    """Its saved experiment.output_root made test mode write there."""
    elsewhere = {"output_root": str(tmp_path / "elsewhere"), "name": "theirs"}
    in_run = saved_with(base, tmp_path / "runs" / "mine" / "run_004" / "checkpoints" / "best.pt", experiment=elsewhere)
    monkeypatch.chdir(tmp_path)
    assert main.main(["--mode", "test", "--checkpoint", str(in_run)]) == 0
    assert (tmp_path / "runs" / "mine" / "test_001" / "metrics.jsonl").is_file()  # beside the run it lies in
    outside = saved_with(base, tmp_path / "loose" / "best.pt", experiment=elsewhere)
    assert (
        main.main(["--mode", "test", "--checkpoint", str(outside), f"experiment.output_root={tmp_path / 'chosen'}"])
        == 0
    )
    assert (tmp_path / "chosen" / "digits_small_cnn" / "test_001").is_dir()  # the user's root, the default name
    assert main.main(["--mode", "export", "--checkpoint", str(outside), "--format", "safetensors"]) == 0
    assert (tmp_path / "output" / "digits_small_cnn" / "export_001").is_dir()  # the defaults, from the working folder
    assert not (tmp_path / "elsewhere").exists()


def test_a_failed_predict_leaves_no_folder(base, tmp_path, capsys):
    """--input /nonexistent left log.txt (and config.yaml) in --output, which then was 'not empty'."""
    args = ["--mode", "predict", "--checkpoint", str(base), "--input", str(tmp_path / "nonexistent")]
    assert main.main([*args, "--output", str(tmp_path / "new" / "deeper")]) == 2
    assert not (tmp_path / "new").exists()  # and the parent it made
    empty = tmp_path / "empty"
    empty.mkdir()
    for _ in range(2):  # reusable: the second time fails on the same --input, not on a folder 'not empty'
        assert main.main([*args, "--output", str(empty)]) == 2
        assert "is not a file, a folder or a glob" in errors_of(capsys)[0] and list(empty.iterdir()) == []
    experiment = base.parents[2]
    assert main.main(args) == 2
    assert not any(path.name.startswith("predict_") for path in experiment.iterdir())


def test_a_failed_training_start_leaves_no_run_and_latest_as_it_was(base, tmp_path, capsys):
    root = tmp_path / "out"
    shutil.copytree(base.parents[2], root / "t", symlinks=True)
    bad = [*fast_overrides(root, "t", epochs=1), "train.iterations=2", "threads=1", f"model.pretrained={tmp_path}"]
    assert main.main(bad) == 2 and "is a folder" in errors_of(capsys)[0]
    assert not (root / "t" / "run_002").exists() and os.readlink(root / "t" / "latest") == "run_001"
    assert main.main([*fast_overrides(root, "new", epochs=1), *bad[4:]]) == 2
    assert not (root / "new").exists()  # no latest without a run, no empty experiment


def test_a_training_run_that_wrote_a_checkpoint_keeps_its_folder(tmp_path, capsys):
    hook = ["custom_imports=[tests.fixtures.user_error_hook]", "hooks=[{name: user_error_at_validation, epoch: 0}]"]
    assert main.main([*fast_overrides(tmp_path, "k", epochs=1), "train.iterations=2", "threads=1", *hook]) == 2
    assert errors_of(capsys) == ["error: a bad sample in the validation of epoch 0"]
    run = tmp_path / "k" / "run_001"
    assert (run / "checkpoints" / "epoch0000_batch000002.pt").is_file() and os.readlink(
        tmp_path / "k" / "latest"
    ) == "run_001"


@pytest.mark.parametrize(
    "name", ["run_002", "test_001", "predict_007", "export_003", "latest", "checkpoints", "run_009/out"]
)
def test_an_output_named_like_the_layout_s_own_folders_is_refused(base, tmp_path, name, capsys):
    """--output .../checkpoints made a folder look like a framework-0.2 experiment; .../run_002 like a run."""
    output = tmp_path / "base" / name
    assert main.main(["--mode", "export", "--checkpoint", str(base), "--output", str(output)]) == 2
    taken = name.split("/")[0]
    (line,) = errors_of(capsys)
    assert line.startswith(
        f"error: --output '{output}' {'is' if taken == name else 'would create'} a folder named '{taken}', a name the run layout keeps"
    )
    assert not (tmp_path / "base").exists()
