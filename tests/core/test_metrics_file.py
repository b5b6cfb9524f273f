"""metrics.jsonl through its one module: rows appended and read back, and each reader's policy for a damaged
line (strict: one error naming the file and the line; lenient: skipped with a warning; a cut last line: left
out, or dropped when the run resumes)."""

from __future__ import annotations

import json
import os

import pytest

from utils.errors import DataError
from utils.run import metrics_file

ROWS = [{"split": "val", "epoch": e, "step": 10 * (e + 1), "top1": 0.5 + e / 10} for e in range(3)]


def written(path, rows, tail=""):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + tail)
    return path


def test_rows_appended_are_read_back_by_every_reader(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert metrics_file.read_strict(path) == [] and metrics_file.read_lenient(path) == []  # no file: no rows
    for row in ROWS:
        metrics_file.append(path, row)
    assert metrics_file.read_strict(path) == list(enumerate(ROWS, start=1))
    assert metrics_file.read_lenient(path) == ROWS


def test_strict_reading_names_the_file_and_the_line_of_a_damaged_row(tmp_path):
    path = written(tmp_path / "metrics.jsonl", ROWS[:1], '{"split": "val", "top1": 0.\n' + json.dumps(ROWS[1]) + "\n")
    with pytest.raises(DataError, match=rf"^'{path}' line 2 is not a JSON object \(.*; repair or remove that line$"):
        metrics_file.read_strict(path)
    written(path, ROWS[:1], "[1, 2]\n")
    with pytest.raises(DataError, match=r"line 2 is not a JSON object: '\[1, 2\]'; repair .*, or leave it out$"):
        metrics_file.read_strict(path, "leave it out")
    written(path, ROWS[:1], "x" * (metrics_file.MAX_LINE + 1))
    with pytest.raises(DataError, match=r"line 2 is longer than 1,048,576 characters"):
        metrics_file.read_strict(path)


def test_a_last_line_cut_short_is_left_out_by_the_readers_and_dropped_when_the_run_resumes(tmp_path, caplog):
    path = written(tmp_path / "metrics.jsonl", ROWS, '{"split": "test", "ep')
    assert metrics_file.read_strict(path) == list(enumerate(ROWS, start=1))
    assert f"'{path}' line 4 was cut short (the run stopped while writing it); it is left out" in caplog.text
    assert metrics_file.read_lenient(path) == ROWS
    assert f"{path}: 1 line(s) are not JSON (cut short by a crash or a full disk); skipped" in caplog.text
    assert metrics_file.rewind(path, 20) == ROWS[:2]  # the rows after the checkpoint's step go too
    assert f"{path}: 1 line(s) are not JSON (cut short by a crash or a full disk); dropped" in caplog.text
    assert path.read_text() == "".join(json.dumps(row) + "\n" for row in ROWS[:2])
    assert os.listdir(tmp_path) == ["metrics.jsonl"]  # rewritten whole, no temporary file left


def test_lenient_reading_skips_a_damaged_line_anywhere_and_rewind_keeps_a_whole_file_as_it_is(tmp_path, caplog):
    path = written(tmp_path / "metrics.jsonl", ROWS[:1], "not json\n" + json.dumps(ROWS[2]) + "\n")
    assert metrics_file.read_lenient(path) == [ROWS[0], ROWS[2]]
    assert "1 line(s) are not JSON" in caplog.text
    whole = written(tmp_path / "whole.jsonl", [*ROWS, {"split": "val", "epoch": 0}])  # a row of an old version
    before = whole.stat().st_mtime_ns
    assert metrics_file.rewind(whole, 30) == [*ROWS, {"split": "val", "epoch": 0}]
    assert whole.stat().st_mtime_ns == before  # nothing to drop: not rewritten
