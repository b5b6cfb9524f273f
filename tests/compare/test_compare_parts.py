"""The parts of ``--mode compare`` on their own: which folders are runs, which keys make a configuration, the
statistics' edge cases, the figure with many configurations."""

from __future__ import annotations

import math
import os

import pytest
from scipy.stats import ttest_ind

from tests.fixtures.compare_runs import resolved_config, write_run
from utils.compare.figure import LEGEND_LINES, PANELS, draw_figure, drawn_metrics, legend_lines, nice_ticks
from utils.compare.group import group_runs, varied_keys
from utils.compare.monitor import Monitor
from utils.compare.ranking import metric_names, partial_metrics, rank
from utils.compare.stats import summarize, t_quantile, welch_p_values
from utils.config.typed_merge import flatten
from utils.errors import DataError
from utils.run.results import ComparedRun, find_runs, read_run


def test_find_runs_in_order_each_once_without_other_modes_folders(tmp_path):
    folder = tmp_path / "exp"
    for number in (2, 10, 1):
        write_run(
            folder / f"run_{number:03d}" if number < 10 else folder / "run_1000", resolved_config(folder, 1), None
        )
    write_run(folder / "test_001", resolved_config(folder, 1), {"top1": 1.0})
    write_run(folder / "predict_002_x", resolved_config(folder, 1), None)
    (folder / "compare_001").mkdir()
    (folder / "notes").mkdir()
    os.symlink("run_002", folder / "latest")
    found = find_runs([folder, folder / "latest", folder / "run_001"])
    assert [path.name for path in found] == ["run_001", "run_002", "run_1000"]  # 1000 after 2: numbers, not text
    assert find_runs([folder / "latest"]) == [folder / "latest"]  # a link given by name is the run it points to
    with pytest.raises(DataError, match="no runs found"):
        find_runs([folder / "notes"])  # a folder beside runs stands for none of them (a sweep's lists its own)


def test_a_run_killed_before_its_first_validation_is_a_run_without_a_test_row(tmp_path):
    run = write_run(tmp_path / "exp" / "run_001", resolved_config(tmp_path / "exp", 1), None)
    (run / "metrics.jsonl").unlink()
    assert find_runs([run]) == [run] and read_run(run).test is None


def test_varied_keys_leave_out_the_seed_and_bookkeeping_and_see_lists_and_missing_keys():
    a = flatten({"seed": 1, "experiment": {"name": "a", "output_root": "x", "run_tag": "t1"}, "m": {"w": [8, 16]}})
    b = flatten({"seed": 2, "experiment": {"name": "b", "output_root": "y", "run_tag": "t2"}, "m": {"w": [8, 32]}})
    c = dict(b, **{"m.extra": 1})
    assert varied_keys([a, b]) == ["m.w"]
    assert varied_keys([a, b, c]) == ["m.w", "m.extra"]
    assert flatten({"model": {"args": {}}}) == {"model.args": {}}


def test_configurations_in_order_of_their_first_run_with_a_missing_key_shown_as_a_dash(tmp_path):
    def record(name, test, **values):
        return ComparedRun(tmp_path / name, resolved_config(tmp_path, int(name[1:]), **values), test)

    records = [
        record("r1", {"top1": 0.5}, optim__lr=0.1),
        record("r2", {"top1": 0.7}, optim__lr=0.2, model__args__width=8),
        record("r3", None, optim__lr=0.1),
        record("r4", {"top1": 0.6}, optim__lr=0.1),
    ]
    keys, configurations, incomplete = group_runs(records)
    assert keys == ["optim.lr", "model.args.width"]  # in the order the configs first write them
    assert [c.values for c in configurations] == [
        {"model.args.width": "-", "optim.lr": 0.1},
        {"model.args.width": 8, "optim.lr": 0.2},
    ]
    assert [c.n for c in configurations] == [2, 1] and [r.path.name for r in incomplete] == ["r3"]
    rows = rank(configurations, metric_names(configurations), Monitor("top1", "max"))
    assert [row.configuration.n for row in rows] == [1, 2] and rows[1].p_value is None  # n=1 best: no test


def test_statistics_edge_cases():
    assert t_quantile(2) == pytest.approx(4.302652729911275)
    one = summarize([0.5])
    assert (one.n, one.mean, one.std, one.ci_low, one.ci_high) == (1, 0.5, None, None, None)
    same = summarize([0.5, 0.5, 0.5])
    assert same.std == 0.0 and same.ci_low == same.ci_high == 0.5
    samples = [[0.5, 0.55], [0.5], [0.5, 0.6], [0.4, 0.5, 0.6], [0.7, 0.7]]
    p_values = welch_p_values(samples, [0.5, 0.6])
    assert p_values[1] is None and p_values[2] == pytest.approx(1.0)  # one value: no test
    assert p_values[3] == pytest.approx(ttest_ind([0.4, 0.5, 0.6], [0.5, 0.6], equal_var=False).pvalue)
    assert p_values[0] == pytest.approx(ttest_ind([0.5, 0.55], [0.5, 0.6], equal_var=False).pvalue)
    assert welch_p_values(samples, [0.7, 0.7])[4] is None  # neither spreads: nothing to test against
    assert welch_p_values(samples, [0.7]) == [None] * 5


def test_a_nan_metric_is_shown_and_sorts_last(tmp_path):
    records = [
        ComparedRun(tmp_path / "a1", resolved_config(tmp_path, 1, optim__lr=0.1), {"top1": math.nan}),
        ComparedRun(tmp_path / "a2", resolved_config(tmp_path, 2, optim__lr=0.1), {"top1": 0.9}),
        ComparedRun(tmp_path / "b1", resolved_config(tmp_path, 1, optim__lr=0.2), {"top1": 0.5}),
        ComparedRun(tmp_path / "b2", resolved_config(tmp_path, 2, optim__lr=0.2), {"top1": 0.6}),
    ]
    _, configurations, _ = group_runs(records)
    rows = rank(configurations, ["top1"], Monitor("top1", "max"))
    nan_row = rows[1].stats["top1"]
    assert rows[0].configuration.values == {"optim.lr": 0.2} and rows[1].p_value is None
    assert all(math.isnan(v) for v in (nan_row.mean, nan_row.std, nan_row.ci_low, nan_row.ci_high))
    assert summarize([math.inf, -math.inf]).n == 2  # no ValueError from an exact sum
    draw_figure(rows, ["top1"], Monitor("top1", "max"), incomplete=0)


def test_nice_ticks_cover_the_range_with_round_steps():
    assert nice_ticks(0.081, 0.157) == pytest.approx([0.1, 0.12, 0.14])
    assert nice_ticks(2.25, 2.31) == pytest.approx([2.26, 2.28, 2.30])
    assert nice_ticks(-3, 12) == pytest.approx([0, 5, 10])


def test_the_figure_of_many_configurations_stays_readable(tmp_path):
    records = [
        ComparedRun(tmp_path / f"r{i}", resolved_config(tmp_path, s, optim__lr=i / 1000), {"top1": i / 100 + s / 1000})
        for i in range(1, 61)
        for s in (1, 2)
    ]
    _, configurations, _ = group_runs(records)
    rows = rank(configurations, ["top1"], Monitor("top1", "max"))
    image = draw_figure(rows, ["top1"], Monitor("top1", "max"), incomplete=1)
    assert 60 * 22 <= image.width <= 2000 and image.height < 1500
    legend = legend_lines(rows, 1)
    assert legend[1] == "1: optim.lr=0.06 (n=2)" and legend[-2] == f"ranks {LEGEND_LINES + 1}-60: see compare.md"
    assert legend[-1] == "1 incomplete run(s) without a test row: not shown"


def test_a_seed_run_twice_counts_once_the_newest_or_on_a_tie_the_later_found(tmp_path):
    def record(name, seed, written):
        return ComparedRun(tmp_path / name, resolved_config(tmp_path, seed), {"top1": 0.5}, 1, written)

    _, [configuration], _ = group_runs(
        [record("a", 1, 5.0), record("b", 2, 5.0), record("c", 1, 5.0), record("d", 1, 4.0)]
    )
    assert [run.path.name for run in configuration.runs] == ["c", "b"] and configuration.n == 2
    assert [run.path.name for run in configuration.repeats] == ["a", "d"]


def test_a_metric_some_runs_lack_is_named_with_the_runs_it_is_over(tmp_path):
    """The row said n=3 while top5's mean was over 2 runs, without a word."""
    records = [
        ComparedRun(
            tmp_path / f"r{seed}", resolved_config(tmp_path, seed), {"top1": 0.5, **({"top5": 0.9} if seed < 3 else {})}
        )
        for seed in (1, 2, 3)
    ]
    _, configurations, _ = group_runs(records)
    rows = rank(configurations, ["top1", "top5"], Monitor("top1", "max"))
    assert rows[0].stats["top5"].n == 2 and rows[0].configuration.n == 3
    assert partial_metrics(rows, ["top1", "top5"]) == [
        f"all runs: test_top5 is in 2 of its 3 runs' test rows (not in {tmp_path / 'r3'}); its statistics are over 2 run(s), not n=3"
    ]


def test_the_figure_stays_small_whatever_the_test_rows_hold(tmp_path):
    """3,000 metrics in a test row (a 60 KB line) drew a 290-megapixel figure in 2 GB and 13 s."""
    metrics = [f"m{i}" for i in range(PANELS + 6)] + ["x" * 5000]
    records = [
        ComparedRun(tmp_path / f"r{s}", resolved_config(tmp_path, s), dict.fromkeys(metrics, s / 10)) for s in (1, 2)
    ]
    _, configurations, _ = group_runs(records)
    monitor = Monitor(metrics[-1], "max")
    rows = rank(configurations, metrics, monitor)
    assert drawn_metrics(metrics, monitor) == [metrics[-1], *metrics[: PANELS - 1]]
    image = draw_figure(rows, metrics, monitor, incomplete=0)
    assert image.width <= 1500 and image.width * image.height <= 10_000_000  # 24 panels, one a line, at most
    assert legend_lines(rows, 0, undrawn=7)[-1] == "7 more test metric(s) without a panel: see compare.csv"
