"""``--output`` of predict and export: never a run folder or a folder inside one (their records stay as they
were, nothing is written), never a folder holding an earlier output; a failed write of the CSV is one
line with predict's advice and leaves no partial file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict

import pytest
import yaml

import main
from tests.fixtures.outputs import one_error, partial_files, small_disk
from utils.run.folder import run_holding


def snapshot(folder: Path) -> Dict[str, bytes]:
    """Every file under ``folder`` (links followed) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_mode(mode: str, trained: dict, output: Path) -> int:
    extra = ["--input", str(trained["data"] / "val")] if mode == "predict" else ["--format", "pt2"]
    return main.main(["--mode", mode, "--checkpoint", str(trained["checkpoint"]), *extra, "--output", str(output)])


@pytest.fixture(scope="module")
def runs(trained, tmp_path_factory) -> dict:
    """The training run, a test run and a predict run of the shared checkpoint, and a folder of framework 0.2."""
    base = tmp_path_factory.mktemp("runs")
    experiment = base / "output" / "apps"
    shutil.copytree(trained["out"] / "apps" / "run_001", experiment / "run_001", symlinks=True)
    os.symlink("run_001", experiment / "latest")
    checkpoint = experiment / "run_001" / "checkpoints" / "best.pt"
    overrides = [f"experiment.output_root={base / 'output'}"]
    assert main.main(["--mode", "test", "--checkpoint", str(checkpoint), *overrides]) == 0
    assert (
        main.main(
            ["--mode", "predict", "--checkpoint", str(checkpoint), "--input", str(trained["data"] / "test"), *overrides]
        )
        == 0
    )
    legacy = base / "legacy" / "exp"
    (legacy / "checkpoints").mkdir(parents=True)
    shutil.copy(checkpoint, legacy / "checkpoints" / "last.pt")
    return {"experiment": experiment, "legacy": legacy, "trained": {**trained, "checkpoint": checkpoint}}


@pytest.mark.parametrize("mode", ["predict", "export"])
@pytest.mark.parametrize("where", ["run", "checkpoints", "latest/sub", "test", "predict", "legacy/sub"])
def test_output_that_is_or_lies_inside_a_run_folder_is_refused_before_anything_is_written(runs, mode, where, capsys):
    """It replaced the run's config.yaml and appended to its log.txt; export wrote into its checkpoints/."""
    experiment = runs["experiment"]
    output, run = {
        "run": (experiment / "run_001", experiment / "run_001"),
        "checkpoints": (experiment / "run_001" / "checkpoints", experiment / "run_001"),
        "latest/sub": (experiment / "latest" / "sub", experiment / "run_001"),
        "test": (experiment / "test_001" / "mine", experiment / "test_001"),
        "predict": (experiment / "predict_001", experiment / "predict_001"),
        "legacy/sub": (runs["legacy"] / "predictions", runs["legacy"]),
    }[where]
    before = snapshot(run.parent)
    assert run_holding(output) == run.resolve()
    assert run_mode(mode, runs["trained"], output) == 2
    expected = "is a run folder" if output == run else f"lies inside the run folder '{run.resolve()}'"
    assert one_error(capsys).startswith(
        f"error: --output '{output}' {expected}; predict and export never write into a run: give a folder outside every run"
    )
    assert snapshot(run.parent) == before
    assert output in (run, run / "checkpoints") or not output.exists()


def test_a_folder_outside_every_run_is_no_run_folder(runs, tmp_path):
    assert run_holding(tmp_path / "new" / "deeper") is None
    assert run_holding(runs["experiment"] / "elsewhere") is None  # beside the runs, in the experiment's folder
    named_like_a_run = tmp_path / "run_001"
    named_like_a_run.mkdir()
    assert run_holding(named_like_a_run / "x") is None  # a run's name alone, without a run's files


@pytest.mark.parametrize("mode", ["predict", "export"])
def test_an_output_folder_holding_an_earlier_output_is_refused_and_an_empty_one_is_used(
    trained, tmp_path, mode, capsys
):
    """A reused --output mixed 60 stale masks of an earlier predict with the new ones."""
    out = tmp_path / "out"
    out.mkdir()  # an existing empty folder is fine
    assert run_mode(mode, trained, out) == 0
    before = snapshot(out)
    assert run_mode(mode, trained, out) == 2
    error = one_error(capsys)
    assert (
        error.startswith(f"error: --output '{out}' is not empty (it holds config.yaml, log.txt, ")
        and "give a new or empty folder" in error
    ), error
    assert snapshot(out) == before


def test_a_full_disk_while_writing_the_csv_is_one_line_with_predicts_advice_and_no_partial_csv(
    trained, tmp_path, capsys
):
    """The error advised --resume, which predict does not have."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for n, image in enumerate(sorted((trained["data"] / "train").rglob("*.png")) * 8):
        (inputs / f"{n:03d}_{image.name}").write_bytes(image.read_bytes())  # 240 rows: a CSV of about 60 kB
    with small_disk(tmp_path / "disk", "16k") as disk:
        assert (
            main.main(
                [
                    "--mode",
                    "predict",
                    "--checkpoint",
                    str(trained["checkpoint"]),
                    "--input",
                    str(inputs),
                    "--output",
                    str(disk / "out"),
                ]
            )
            == 2
        )
        error = one_error(capsys)
        assert (
            error
            == f"error: could not write '{disk / 'out' / 'predictions.csv'}' (No space left on device); free disk space or fix the permissions of its folder, "
            "then run the predict again (into a new or empty --output, or without --output)"
        )
        assert partial_files(disk) == [] and not (disk / "out").exists()  # a start without a result leaves no folder


def test_print_config_of_a_checkpoint_prints_its_saved_config_and_writes_nothing(trained, tmp_path, capsys):
    out = tmp_path / "output"
    argv = ["--mode", "test", "--checkpoint", str(trained["checkpoint"]), f"experiment.output_root={out}"]
    assert main.main([*argv, "--print-config", "data.eval_batch_size=3"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert (
        printed["model"]["args"]["num_classes"] == 3 and printed["data"]["name"] == "image_folder"
    )  # the checkpoint's
    assert printed["data"]["eval_batch_size"] == 3  # and the overrides on top
    assert not out.exists()
