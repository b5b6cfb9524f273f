"""Bad input to ``--mode compare`` is one ``error:`` line (exit 2) and writes nothing; its command line takes PATHs,
``custom_imports=[...]`` and ``--output`` only; a failed write leaves no partial file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import main
from tests.fixtures.compare_runs import resolved_config, write_run
from tests.fixtures.outputs import one_error, partial_files, small_disk
from utils.commands.command_line import parse_command_line
from utils.run.metrics_file import MAX_LINE
from utils.run.results import MAX_CONFIG, read_run


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    folder = tmp_path / "exp"
    for seed in (1, 2):
        write_run(folder / f"run_00{seed}", resolved_config(folder, seed), {"top1": 0.5, "loss": 1.0})
    return folder


def refused(args, capsys) -> str:
    assert main.main(["--mode", "compare", *args]) == 2
    return one_error(capsys)


def test_a_path_that_does_not_exist(experiment, capsys):
    missing = experiment.parent / "nope"
    assert refused([str(experiment), str(missing)], capsys) == (
        f"error: '{missing}' does not exist; give experiment folders (output/<experiment>), sweep folders or run folders"
    )
    assert not list(experiment.glob("compare_*"))


def test_a_folder_without_runs(tmp_path, capsys):
    (tmp_path / "empty" / "inner").mkdir(parents=True)
    error = refused([str(tmp_path / "empty")], capsys)
    assert error.startswith(
        f"error: no runs found in '{tmp_path / 'empty'}': neither it nor a folder in it holds a run's"
    )


def test_the_folder_of_another_mode(experiment, capsys):
    write_run(experiment / "test_001", resolved_config(experiment, 1), {"top1": 0.5})
    assert refused([str(experiment / "test_001")], capsys) == (
        f"error: no runs found in '{experiment / 'test_001'}': it is the folder of a --mode test, not of a training run"
    )


def test_a_file_instead_of_a_folder(experiment, capsys):
    error = refused([str(experiment / "run_001" / "config.yaml")], capsys)
    assert error.endswith("is not a folder; give experiment folders, sweep folders or run folders")


def test_a_corrupt_metrics_line_names_the_file_and_the_line(experiment, capsys):
    metrics = experiment / "run_002" / "metrics.jsonl"
    good = metrics.read_text()
    metrics.write_text(good + '{"split": "test", "top1": 0.\n')
    error = refused([str(experiment)], capsys)
    assert error.startswith(f"error: '{metrics}' line 2 is not a JSON object (")
    assert error.endswith("; repair or remove that line, or leave its run out of the PATHs")
    metrics.write_text("[1, 2]\n")
    assert refused([str(experiment)], capsys) == (
        f"error: '{metrics}' line 1 is not a JSON object: '[1, 2]'; repair or remove that line, or leave its run out of the PATHs"
    )
    metrics.write_text("[" * 100_000 + "]" * 100_000 + "\n")  # deeper than the JSON parser goes: a RecursionError
    assert refused([str(experiment)], capsys).startswith(
        f"error: '{metrics}' line 1 is not a JSON object (maximum recursion"
    )
    metrics.write_text(good + "x" * (MAX_LINE + 10))
    assert refused([str(experiment)], capsys).startswith(
        f"error: '{metrics}' line 2 is longer than 1,048,576 characters"
    )
    assert not list(experiment.glob("compare_*"))


def test_a_last_line_cut_short_is_left_out_with_a_warning(experiment, capsys):
    """A run killed while writing a row leaves its last line without its newline: what it wrote before counts."""
    metrics = experiment / "run_002" / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + '{"split": "test", "top1": 0.')
    assert main.main(["--mode", "compare", str(experiment)]) == 0
    err = capsys.readouterr().err
    assert f"'{metrics}' line 2 was cut short (the run stopped while writing it); it is left out" in err
    assert read_run(metrics.parent).test == {"top1": 0.5, "loss": 1.0}


@pytest.mark.parametrize("value", ['"0.9"', "true", "null", "[0.9]", "1" + "0" * 400])
def test_a_test_metric_that_is_no_number_is_one_line(experiment, value, capsys):
    """A string was dropped without a word, and the row still said n=2."""
    metrics = experiment / "run_002" / "metrics.jsonl"
    metrics.write_text('{"split": "test", "epoch": 0, "step": 10, "top1": %s, "loss": 1.0, "samples": 9}\n' % value)
    error = refused([str(experiment)], capsys)
    assert error.startswith(f"error: '{metrics}' line 1: test metric 'top1' is ")
    assert error.endswith(
        ", not a number (NaN and inf are); repair or remove that line, or leave its run out of the PATHs"
    )
    assert not list(experiment.glob("compare_*"))


def test_a_huge_or_odd_config_is_one_line(experiment, capsys):
    config = experiment / "run_001" / "config.yaml"
    with open(config, "a") as handle:
        handle.truncate(MAX_CONFIG + 1)  # a sparse file: no 16 MB written
    assert refused([str(experiment)], capsys) == (
        f"error: '{config}' holds 16,777,217 bytes, more than 16,777,216: it is no run's config (a few KB); leave its run out of the PATHs"
    )
    tree = resolved_config(experiment, 1)
    tree["eval"].update(monitor_mode="best", extra_metrics=[{"name": ["F1"]}])
    config.write_text(yaml.safe_dump(tree))
    assert refused([str(experiment)], capsys) == (
        f"error: '{config}' has eval.monitor_mode 'best', eval.extra_metrics of a kind no run writes: is it a run's resolved config?"
    )


def test_a_sweep_table_naming_a_run_elsewhere_is_one_line(experiment, tmp_path, capsys):
    """trials.csv's runs were joined to the experiment's folder as they were: '../x/run_001' reached another
    folder, whose experiment then received the compare_NNN folder."""
    elsewhere = write_run(tmp_path / "x" / "run_001", resolved_config(tmp_path / "x", 1), {"top1": 0.1, "loss": 2.0})
    sweep = experiment / "sweep_s"
    sweep.mkdir()
    (sweep / "trials.csv").write_text("trial,runs\n0,run_001 run_002\n1,../x/run_001\n")
    assert refused([str(sweep)], capsys) == (
        f"error: '{sweep / 'trials.csv'}' line 3 names the run '../x/run_001', which is no folder name beside the sweep's "
        "folder (a sweep's runs are <experiment>/run_NNN_<tag>); repair the table, or give the run folders"
    )
    (sweep / "trials.csv").write_bytes(b"trial,runs\n0,run_\xff\n")
    assert refused([str(sweep)], capsys).startswith(f"error: cannot read '{sweep / 'trials.csv'}' as a sweep's table")
    assert not list(elsewhere.parent.glob("compare_*")) and not list(experiment.glob("compare_*"))


def test_a_broken_config_names_its_file(experiment, capsys):
    config = experiment / "run_001" / "config.yaml"
    fix = "; leave its run out of the PATHs (a run writes its resolved config there)"
    config.write_text("optim: [unclosed\n")
    error = refused([str(experiment)], capsys)
    assert error.startswith(f"error: '{config}' is not a run's config: ") and error.endswith(fix)
    config.write_text("- a list\n")
    assert refused([str(experiment)], capsys) == (
        f"error: '{config}' is not a run's config: it holds list, not a mapping of sections{fix}"
    )
    config.write_text("optim:\n  ? [a, b]\n  : 1\n")  # a list as a key: a TypeError's traceback
    assert refused([str(experiment)], capsys) == (
        f"error: '{config}' is not a run's config: found unhashable key (line 2){fix}"
    )


def test_output_inside_a_run_or_not_empty_is_refused(experiment, tmp_path, capsys):
    error = refused([str(experiment), "--output", str(experiment / "run_001" / "table")], capsys)
    assert f"lies inside the run folder '{experiment / 'run_001'}'" in error
    assert not (experiment / "run_001" / "table").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "compare.csv").write_text("earlier\n")
    error = refused([str(experiment), "--output", str(tmp_path / "full")], capsys)
    assert error.startswith(f"error: --output '{tmp_path / 'full'}' is not empty (it holds compare.csv)")
    assert (tmp_path / "full" / "compare.csv").read_text() == "earlier\n"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--mode compare needs at least one PATH: an experiment folder, a sweep folder or run folders"),
        (
            ["x", "--config", "c.yaml"],
            "--config does nothing in --mode compare: it is for --mode train/test/predict/export",
        ),
        (["x", "--checkpoint", "b.pt"], "--checkpoint does nothing in --mode compare"),
        (["x", "--resume"], "--resume does nothing in --mode compare: it is for --mode train"),
        (["x", "--trust-file", "b.pt"], "--trust-file does nothing in --mode compare"),
        (["x", "--format", "pt2"], "--format does nothing in --mode compare: it is for --mode export"),
    ],
)
def test_the_command_line_takes_paths_and_output_only(args, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main.main(["--mode", "compare", *args])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert stop.value.code == 2 and len(errors) == 1 and message in errors[0], errors


def test_paths_are_not_overrides_and_other_modes_keep_theirs():
    command, args = parse_command_line(["--mode", "compare", "a", "optim.lr=0.1", "--output", "o"], "")
    assert command.mode == "compare" and args.paths == ["a", "optim.lr=0.1"] and args.output == "o"
    assert not hasattr(args, "overrides")
    _, args = parse_command_line(["--mode", "compare", "a", "custom_imports=[my.metrics]", "b"], "")  # its one key
    assert args.paths == ["a", "b"] and args.imports == ["custom_imports=[my.metrics]"]
    command, args = parse_command_line(["optim.lr=0.1", "--trust-file", "w.pt"], "")
    assert command.mode == "train" and args.overrides == ["optim.lr=0.1"] and args.trust_file == ["w.pt"]


def test_a_failed_write_is_one_line_and_leaves_no_partial_file(experiment, tmp_path, capsys):
    with small_disk(tmp_path / "disk", "8k") as disk:
        error = refused([str(experiment), "--output", str(disk)], capsys)
        assert error.startswith(f"error: could not write '{disk / 'compare.png'}' (No space left on device)")
        assert error.endswith("run the compare again (into a new or empty --output, or without --output)")
        assert partial_files(disk) == []


def test_runs_without_a_test_row_yet_are_named_with_how_far_they_got(tmp_path, capsys):
    """A run in its first epoch (config.yaml, .lock, log.txt, tb/: no metrics, no checkpoint yet) was no run:
    "no runs found"."""
    experiment = tmp_path / "exp"
    first = experiment / "run_001"
    (first / "tb").mkdir(parents=True)
    (first / "config.yaml").write_text(yaml.safe_dump(resolved_config(experiment, 1)))
    (first / ".lock").write_text("")
    (first / "log.txt").write_text("epoch 0 ...\n")
    assert refused([str(experiment)], capsys) == (
        f"error: nothing to compare in '{experiment}' yet: 1 run found, none has a test row ({first} has not validated "
        "yet: in the first epoch, or stopped in it); compare again when a run has finished (its test row is written at its end)"
    )
    write_run(experiment / "run_002", resolved_config(experiment, 2), None, val=[{"top1": 0.5}])
    assert refused([str(experiment)], capsys) == (
        f"error: nothing to compare in '{experiment}' yet: 2 runs found, none has a test row ({first} has not validated "
        f"yet: in the first epoch, or stopped in it; {experiment / 'run_002'} has validated but not tested: training, or "
        "stopped); compare again when a run has finished (its test row is written at its end)"
    )
    assert not list(experiment.glob("compare_*"))
