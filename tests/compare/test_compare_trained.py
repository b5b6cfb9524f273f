"""``--mode compare`` of two real training runs (digits, one epoch, two learning rates): its table holds each run's
own test row, as ``main.py`` printed it."""

from __future__ import annotations

import csv

import pytest

import main
from tests.conftest import fast_overrides


@pytest.mark.slow
def test_two_trained_runs_compare_by_their_learning_rate(out_root, capsys):
    printed = {}
    for lr in ("0.001", "0.01"):
        assert main.main([*fast_overrides(out_root, "cmp", epochs=1), f"optim.lr={lr}", "threads=1"]) == 0
        line = [row for row in capsys.readouterr().out.splitlines() if row.startswith("test: ")][-1]
        printed[lr] = dict(pair.split("=") for pair in line.split()[1:])
    experiment = out_root / "cmp"
    assert main.main(["--mode", "compare", str(experiment)]) == 0
    out = capsys.readouterr().out
    with open(experiment / "compare_001" / "compare.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["optim.lr"] for row in rows) == ["0.001", "0.01"] and [row["n"] for row in rows] == ["1", "1"]
    assert float(rows[0]["test_top1_mean"]) >= float(rows[1]["test_top1_mean"])  # best first
    for row in rows:
        for metric in ("top1", "top5", "loss"):
            assert f"{float(row[f'test_{metric}_mean']):.4f}" == printed[row["optim.lr"]][metric]
        assert row["test_top1_std"] == row["p_value"] == ""  # one seed each: no spread, no test
    assert "| rank | optim.lr | n | test_top1_mean |" in out
    assert (experiment / "compare_001" / "compare.png").stat().st_size > 1000
