"""Sweeps with real processes: kill -9 mid-sweep and the same command again (6 runs, none trained twice, the
interrupted one resumed exactly), a seed added to a finished sweep (that seed trained alone, a run whose test row a
kill cut short resumed), a pruned trial on 2 ranks, two workers on one SQLite study running two trials each
at once."""

from __future__ import annotations

import csv
import os
import re
import signal
import time

import pytest

from tests.fixtures.metrics_rows import rows
from tests.sweep.sweeps import command, finished, run, runs_by_tag, start, sweep_file

pytest.importorskip("optuna")
pytestmark = pytest.mark.slow


def test_killed_sweep_continues_without_training_any_run_twice(tmp_path):
    out = tmp_path / "out"
    sweep = sweep_file(tmp_path, "grid", {"space": {"optim.lr": {"grid": [0.01, 0.03]}}, "seeds": [0, 1]})
    cmd = command(sweep, out, "train.epochs=1")
    experiment = out / "digits_small_cnn"
    proc = start(cmd)
    deadline = time.monotonic() + 240
    interrupted = None
    while interrupted is None:  # kill once two runs are done and a third has a checkpoint but no test row
        assert proc.poll() is None and time.monotonic() < deadline, "".join(proc.output())[-3000:]
        folders = [f for fs in runs_by_tag(experiment).values() for f in fs]
        done = [f for f in folders if finished(f)]
        busy = [f for f in folders if not finished(f) and any((f / "checkpoints").glob("*.pt"))]
        if len(done) >= 2 and busy:
            os.kill(proc.pid, signal.SIGKILL)  # the sweep alone: its running trial must not train on behind it
            interrupted = busy[0]
        time.sleep(0.02)
    proc.wait()
    before = {f: (f / "metrics.jsonl").read_text() for f in done}
    again = run(cmd)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    tags = runs_by_tag(experiment)
    assert len(tags) == 4, sorted(tags)
    for tag, folders in tags.items():
        assert sum(finished(f) for f in folders) == 1, (tag, folders)  # every configuration and seed finished once
    for folder, text in before.items():
        assert (folder / "metrics.jsonl").read_text() == text, folder  # finished runs were not trained again
    assert "training state restored" in (interrupted / "log.txt").read_text()
    # the resumed run ends exactly as that configuration and seed trained without a break
    tag = interrupted.name.split("_", 2)[2]
    lr, seed = tag.split("_")[1].split("=")[1], tag.split("=")[-1]
    alone = run(
        [
            "python",
            "main.py",
            f"experiment.output_root={tmp_path / 'alone'}",
            f"optim.lr={lr}",
            f"seed={seed}",
            *cmd[5:],
        ]
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    expected = [r for r in rows(next((tmp_path / "alone" / "digits_small_cnn").glob("run_*"))) if r["split"] == "test"]
    assert [r for r in rows(interrupted) if r["split"] == "test"] == expected
    table = list(csv.DictReader((experiment / "sweep_grid" / "trials.csv").open()))
    assert sorted(r["state"] for r in table if "queued" not in r["state"]) == ["complete", "complete"], table


def test_a_seed_added_to_a_finished_sweep_trains_that_seed_and_resumes_a_run_cut_mid_row(tmp_path):
    out = tmp_path / "out"
    spec = {"space": {"optim.lr": {"grid": [0.03]}}, "seeds": [0]}
    cmd = command(sweep_file(tmp_path, "seeds", spec), out, "train.epochs=1")
    first = run(cmd)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    experiment = out / "digits_small_cnn"
    (seed0,) = runs_by_tag(experiment)["t000_lr=0.03_seed=0"]
    metrics = seed0 / "metrics.jsonl"
    *kept, test = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(kept) + test[: len(test) // 2])  # killed while writing its test row
    sweep_file(tmp_path, "seeds", {**spec, "seeds": [0, 1]})
    again = run(cmd)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "seed(s) [1] added to the sweep: the complete trial(s) [0] are queued again" in again.stderr
    tags = runs_by_tag(experiment)
    assert sorted(tags) == ["t000_lr=0.03_seed=0", "t000_lr=0.03_seed=1"], tags
    assert all(len(folders) == 1 and finished(folders[0]) for folders in tags.values()), tags
    lines = metrics.read_text().splitlines()
    assert lines[: len(kept)] == [line.rstrip("\n") for line in kept]  # the run dropped its cut row, tested again
    assert [row["split"] for row in rows(metrics)[len(kept) :]] == ["test"]
    table = list(csv.DictReader((experiment / "sweep_seeds" / "trials.csv").open()))
    assert [(r["configuration"], r["state"]) for r in table] == [
        ("0", "complete (continued in trial 1)"),
        ("0", "complete"),
    ]
    best = [max(r["top1"] for r in rows(folders[0]) if r["split"] == "val") for folders in tags.values()]
    assert float(table[1]["value (top1)"]) == pytest.approx(sum(best) / 2, abs=1e-6)  # the mean over both seeds
    assert len(table[1]["runs"].split()) == 2
    # where the table is, and the best as a run's best line rounds it (was 6 digits)
    assert f"sweep folder {experiment / 'sweep_seeds'} (trials.md, trials.csv)" in again.stdout
    assert re.search(r"^sweep seeds: best top1=\d\.\d{4} in trial 1 ", again.stdout, re.M), again.stdout


def test_a_trial_worse_than_the_median_is_pruned_on_two_ranks_and_keeps_its_checkpoint(tmp_path):
    out = tmp_path / "out"
    # the grid sampler (seed 0) tries 0.03 first, then the hopeless 1e-6; each trial a 2-rank torchrun job
    spec = {"space": {"optim.lr": {"grid": [1e-6, 0.03]}}, "pruner": "median", "nproc_per_trial": 2}
    done = run(command(sweep_file(tmp_path, "prune", spec), out, "train.epochs=3", "train.checkpoint_every_steps=0"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = list(csv.DictReader((out / "digits_small_cnn" / "sweep_prune" / "trials.csv").open()))
    assert [(r["optim.lr"], r["state"]) for r in table] == [("0.03", "complete"), ("1e-06", "pruned")], table
    (pruned,) = runs_by_tag(out / "digits_small_cnn")["t001_lr=1e-06_seed=0"]
    vals = [r for r in rows(pruned) if r["split"] == "val"]
    assert len(vals) == 1 and finished(pruned)  # stopped after its first validation, on both ranks, then tested
    assert list((pruned / "checkpoints").glob("epoch0000_batch*"))  # the checkpoint of its one epoch


def test_two_workers_share_one_sqlite_study(tmp_path):
    out = tmp_path / "out"
    spec = {"space": {"optim.lr": {"grid": [0.01, 0.02, 0.03, 0.04]}}, "storage": f"sqlite:///{tmp_path / 'study.db'}"}
    spec["parallel"] = 2  # each worker runs two trials at once
    sweep = sweep_file(tmp_path, "shared", spec)
    cmd = command(sweep, out, "train.epochs=1")
    first = start(cmd)
    time.sleep(1.0)
    second = run(cmd)
    first.wait(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-3000:]
    tags = runs_by_tag(out / "digits_small_cnn")
    assert len(tags) == 4 and all(len(f) == 1 and finished(f[0]) for f in tags.values()), tags
    optuna = pytest.importorskip("optuna")
    trials = optuna.load_study(study_name="shared", storage=spec["storage"]).get_trials()
    assert len({t.user_attrs["pid"] for t in trials}) == 2  # both workers took trials
    overlapping = [
        (a.number, b.number)
        for a in trials
        for b in trials
        if a.number < b.number
        and a.user_attrs["pid"] == b.user_attrs["pid"]
        and a.datetime_start < b.datetime_complete
        and b.datetime_start < a.datetime_complete
    ]
    assert overlapping, [(t.number, t.user_attrs["pid"], t.datetime_start, t.datetime_complete) for t in trials]
