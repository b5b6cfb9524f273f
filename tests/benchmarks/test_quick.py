"""Every benchmark of ``benchmarks/run.py`` runs its quick form, in this process as ``run.py --quick`` runs them,
and returns rows of its own: a change that breaks a benchmark fails here when it lands. A quick run's figures
mean nothing (a few rounds on a shared machine), so they are not held to the goals."""

from __future__ import annotations

import importlib

import pytest

from benchmarks.common import SCRATCH
from benchmarks.run import BENCHMARKS, markdown_table

pytestmark = pytest.mark.slow  # each benchmark trains, evaluates or starts processes


@pytest.mark.timeout(300)
@pytest.mark.parametrize("module, title", BENCHMARKS, ids=[module for module, _ in BENCHMARKS])
def test_the_quick_form_of_each_benchmark_runs_and_returns_its_rows(module, title, tmp_path, monkeypatch):
    monkeypatch.setenv(SCRATCH, str(tmp_path))  # the checkpoint benchmarks write into output/ otherwise
    rows = importlib.import_module(f"benchmarks.{module}").run(quick=True)
    assert rows, f"benchmarks/{module}.py returned no rows"
    for row in rows:
        assert row["benchmark"] == title and row["measure"] != "failed", row
        assert row["value"] not in (None, ""), row
    assert markdown_table(rows).count("\n") == len(rows) + 1  # one table line per row under the header
