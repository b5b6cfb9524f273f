"""A trial's runs read leniently, as the runs read their own metrics.jsonl: a row a kill cut short is skipped
(with a warning naming the file), so the sweep resumes that run, which drops the cut row itself."""

from __future__ import annotations

import json

from utils.run.folder import RunFolder
from utils.run.unfinished import finished
from utils.sweep.trial_runs import best_value

VAL = [{"split": "val", "epoch": e, "step": 22 * e, "top1": v} for e, v in ((1, 0.5), (2, 0.75))]


def test_a_test_row_cut_short_is_no_test_and_the_val_rows_still_count(tmp_path, caplog):
    run = tmp_path / "run_001_t000_lr=0.01_seed=0"
    run.mkdir()
    test = json.dumps({"split": "test", "epoch": 2, "step": 44, "top1": 0.7})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in VAL) + test[:20])
    assert not finished(RunFolder(run))  # the sweep resumes it
    assert best_value(run, "top1", "maximize") == 0.75 and best_value(run, "top1", "minimize") == 0.5
    assert "metrics.jsonl: 1 line(s) are not JSON" in caplog.text
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in VAL) + test + "\n")
    assert finished(RunFolder(run))


def test_a_run_without_metrics_is_neither_tested_nor_scored(tmp_path):
    assert not finished(RunFolder(tmp_path)) and best_value(tmp_path, "top1", "maximize") is None
