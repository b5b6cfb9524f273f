"""``--mode compare`` over 2 configurations x 3 seeds and an incomplete run: the CSV's means, standard deviations,
intervals and p-values against values recomputed here by hand, the order, the incomplete listing, the default
folder, the figure."""

from __future__ import annotations

import csv
import math
import os
import statistics
from pathlib import Path
from typing import Dict, List

import pytest
from PIL import Image
from scipy.stats import t as student_t

import main
from tests.fixtures.compare_runs import resolved_config, write_run

# test top1 and loss of each seed: lr 0.003 is better in top1 (the monitor); the numbers are the test rows
SEEDS = {
    0.001: [(0.81, 0.62), (0.84, 0.55), (0.79, 0.66)],
    0.003: [(0.90, 0.35), (0.93, 0.30), (0.88, 0.41)],
}


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    """output/exp with run_001..run_006 (lr x seed), an incomplete run_007, a --mode test folder and ``latest``."""
    folder = tmp_path / "output" / "exp"
    number = 0
    for lr, seeds in SEEDS.items():
        for seed, (top1, loss) in enumerate(seeds, start=1):
            number += 1
            config = resolved_config(folder, seed, optim__lr=lr)
            write_run(
                folder / f"run_{number:03d}", config, {"top1": top1, "loss": loss}, val=[{"top1": 0.5, "loss": 1}]
            )
    write_run(folder / "run_007", resolved_config(folder, 4, optim__lr=0.001), None, val=[{"top1": 0.99, "loss": 0.1}])
    # a --mode test of run_001's checkpoint: a config and a test row too, but no seed of its own
    write_run(folder / "test_001", resolved_config(folder, 1, optim__lr=0.001), {"top1": 0.0, "loss": 9.0})
    os.symlink("run_007", folder / "latest")
    return folder


def read_csv(path: Path) -> List[Dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def by_hand(values: List[float]) -> Dict[str, float]:
    """Mean, sample std and the 95% Student-t interval, computed without the code under test."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = student_t.ppf(0.975, n - 1) * std / math.sqrt(n)
    return {"mean": mean, "std": std, "ci_low": mean - half, "ci_high": mean + half}


def welch_by_hand(a: List[float], b: List[float]) -> float:
    """Welch's two-sided p-value: t with the Welch-Satterthwaite degrees of freedom."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.mean(a) - statistics.mean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return 2 * student_t.sf(abs(t), df)


def test_the_table_holds_each_configurations_statistics_recomputed_from_its_runs(experiment, capsys):
    assert main.main(["--mode", "compare", str(experiment)]) == 0
    out = capsys.readouterr().out
    folder = experiment / "compare_001"  # the default: a new compare_NNN in the experiment
    rows = read_csv(folder / "compare.csv")
    complete = [row for row in rows if row["state"] == "complete"]
    assert [row["optim.lr"] for row in complete] == ["0.003", "0.001"]  # best first: the higher top1 mean
    assert [row["rank"] for row in complete] == ["1", "2"] and [row["n"] for row in complete] == ["3", "3"]
    for row in complete:
        seeds = SEEDS[float(row["optim.lr"])]
        for index, metric in enumerate(("top1", "loss")):
            expected = by_hand([seed[index] for seed in seeds])
            for stat, value in expected.items():
                assert float(row[f"test_{metric}_{stat}"]) == pytest.approx(value, rel=1e-12, abs=1e-15), (metric, stat)
    assert complete[0]["p_value"] == ""  # the best row is what the others are tested against
    expected_p = welch_by_hand([s[0] for s in SEEDS[0.001]], [s[0] for s in SEEDS[0.003]])
    assert float(complete[1]["p_value"]) == pytest.approx(expected_p, rel=1e-9)
    # the columns the issue names, and nothing about seeds or the folders' names
    assert list(rows[0]) == [
        "rank",
        "optim.lr",
        "n",
        *[f"test_{m}_{s}" for m in ("top1", "loss") for s in ("mean", "std", "ci_low", "ci_high")],
        "p_value",
        "state",
        "runs",
    ]
    # the incomplete run is listed, never averaged (its 0.99 validation would have moved the mean); the test
    # folder and the latest link are no runs of their own
    incomplete = [row for row in rows if row["state"] == "incomplete"]
    assert len(incomplete) == 1 and incomplete[0]["runs"].endswith("run_007") and incomplete[0]["n"] == "0"
    assert incomplete[0]["optim.lr"] == "0.001" and incomplete[0]["test_top1_mean"] == ""
    assert sorted(Path(p).name for p in complete[1]["runs"].split(";")) == ["run_001", "run_002", "run_003"]
    markdown = (folder / "compare.md").read_text()
    assert "Incomplete runs (no test row; not averaged):" in markdown and "run_007 (optim.lr=0.001)" in markdown
    # stdout: the table, the incomplete runs, then one line naming the folder
    assert "| rank | optim.lr | n | test_top1_mean |" in out and "| 1 | 0.003 | 3 | 0.9033 |" in out
    assert out.rstrip().splitlines()[-1] == f"compare: runs=7 configurations=2 incomplete=1 folder={folder}"
    with Image.open(folder / "compare.png") as image:
        image.load()
        assert image.format == "PNG" and 500 <= image.width <= 2000 and 250 <= image.height <= 1500
    assert sorted(p.name for p in folder.iterdir()) == ["compare.csv", "compare.md", "compare.png"]
    # the runs' folders are as they were; a second compare gets a folder of its own
    assert main.main(["--mode", "compare", str(experiment)]) == 0
    assert (experiment / "compare_002" / "compare.csv").read_text() == (folder / "compare.csv").read_text()


def test_a_monitor_better_lower_sorts_ascending_and_one_seed_has_no_spread(tmp_path, capsys):
    folder = tmp_path / "exp"
    for number, (lr, loss) in enumerate([(0.1, 0.5), (0.2, 0.3), (0.2, 0.4), (0.3, 0.9)], start=1):
        config = resolved_config(folder, number, optim__lr=lr, eval__monitor="loss")
        write_run(folder / f"run_{number:03d}", config, {"top1": 0.5, "loss": loss})
    out_dir = tmp_path / "table"
    assert main.main(["--mode", "compare", str(folder), "--output", str(out_dir)]) == 0
    rows = read_csv(out_dir / "compare.csv")
    assert [row["optim.lr"] for row in rows] == ["0.2", "0.1", "0.3"]  # loss: lower is better
    assert float(rows[0]["test_loss_mean"]) == pytest.approx(0.35)
    one_seed = rows[1]
    assert one_seed["n"] == "1" and float(one_seed["test_loss_mean"]) == 0.5
    assert one_seed["test_loss_std"] == one_seed["test_loss_ci_low"] == one_seed["p_value"] == ""
    assert "lower is better" in capsys.readouterr().out
    assert not list(folder.glob("compare_*"))  # --output given: nothing in the experiment


def test_run_folders_of_two_experiments_mixed_and_nothing_varied(tmp_path):
    """Experiment names never split a configuration; with no key varied, one row holds every seed."""
    runs = []
    for name, seeds in (("a", (1, 2)), ("b", (3, 4))):
        folder = tmp_path / "output" / name
        for seed in seeds:
            runs.append(write_run(folder / f"run_00{seed}", resolved_config(folder, seed), {"top1": 0.5 + seed / 10}))
    assert main.main(["--mode", "compare", *map(str, runs)]) == 0
    rows = read_csv(tmp_path / "output" / "a" / "compare_001" / "compare.csv")  # the first PATH's experiment
    assert len(rows) == 1 and rows[0]["n"] == "4" and list(rows[0])[:2] == ["rank", "n"]
    assert float(rows[0]["test_top1_mean"]) == pytest.approx(0.75)


def test_one_configuration_and_seed_is_one_sample(tmp_path, capsys):
    """Two runs of one configuration and one seed (trained twice, or one experiment copied into another) were
    two samples: n=2 and an interval of width zero from one seed's value twice."""
    folder = tmp_path / "exp"
    for number, (seed, top1) in enumerate([(1, 0.5), (2, 0.7), (1, 0.9), (2, 0.7)], start=1):
        write_run(folder / f"run_00{number}", resolved_config(folder, seed, optim__lr=0.1), {"top1": top1})
    write_run(folder / "run_005", resolved_config(folder, 1, optim__lr=0.2), {"top1": 0.6})
    for number, age in ((1, 300), (2, 0), (3, 200), (4, 100)):  # run_002 is its seed's newest, run_003 its seed's
        os.utime(folder / f"run_00{number}" / "metrics.jsonl", (1e9 - age, 1e9 - age))
    assert main.main(["--mode", "compare", str(folder)]) == 0
    captured = capsys.readouterr()
    rows = read_csv(folder / "compare_001" / "compare.csv")
    complete = [row for row in rows if row["state"] == "complete"]
    assert [(row["optim.lr"], row["n"]) for row in complete] == [("0.1", "2"), ("0.2", "1")]
    assert float(complete[0]["test_top1_mean"]) == pytest.approx(0.8)  # seed 1: run_003's 0.9, not run_001's 0.5
    assert [Path(p).name for p in complete[0]["runs"].split(";")] == ["run_003", "run_002"]
    repeated = [(row["optim.lr"], Path(row["runs"]).name, row["n"]) for row in rows if row["state"] == "repeated"]
    assert repeated == [("0.1", "run_001", "0"), ("0.1", "run_004", "0")]
    for seed, kept, left in ((1, "run_003", "run_001"), (2, "run_002", "run_004")):
        line = f"optim.lr=0.1, seed {seed}: 2 complete runs, one sample: the newest, {folder / kept}, is counted, not {folder / left}"
        assert line in captured.err and f"- {line}" in captured.out
    assert "Repeated seeds (one configuration and seed is one sample; not averaged):" in captured.out


def test_a_sweep_folder_stands_for_the_runs_its_table_lists(tmp_path):
    folder = tmp_path / "exp"
    names = []
    for seed in (1, 2, 3):
        tag = f"run_00{seed}_t000_lr=0.1_seed={seed}"  # a sweep trial's folder name
        config = resolved_config(folder, seed, experiment__run_tag=tag[8:])
        write_run(folder / tag, config, {"top1": 0.5})
        names.append(tag)
    (folder / "sweep_lr").mkdir()  # the sweep's table names two of the three runs beside it
    (folder / "sweep_lr" / "trials.csv").write_text(f"trial,state,runs\n0,complete,{names[0]} {names[1]}\n")
    assert main.main(["--mode", "compare", str(folder / "sweep_lr")]) == 0
    rows = read_csv(folder / "compare_001" / "compare.csv")
    assert len(rows) == 1 and rows[0]["n"] == "2"  # experiment.run_tag is bookkeeping, not a configuration


def test_the_printed_table_fits_the_terminal_and_says_where_the_whole_table_is(experiment, capsys, monkeypatch):
    """12 columns (rank, optim.lr, n, 4 statistics of top1 and of loss, p_value) printed into 80 were wrapped."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main.main(["--mode", "compare", str(experiment)]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table and all(len(line) <= 80 for line in table), table
    head = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert head[:4] == ["rank", "optim.lr", "n", "test_top1_mean"]  # the most important, in the table's order
    folder = experiment / "compare_001"
    note = next(line for line in out.splitlines() if "more column(s) in" in line)
    assert note.startswith(f"{12 - len(head)} more column(s) in {folder}/compare.md and compare.csv"), note
    assert "test_top1_std" in note and "test_top1_std" in (folder / "compare.md").read_text()  # there, whole
    monkeypatch.delenv("COLUMNS")  # no terminal (captured): the whole table, as compare.md holds it
    assert main.main(["--mode", "compare", str(experiment)]) == 0
    assert "more column(s)" not in capsys.readouterr().out
