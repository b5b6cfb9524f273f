"""A path longer than its file system allows (a name over 255 bytes), given on the command line or met on the way,
is one ``error:`` line, never the OSError (File name too long) of the first ``exists`` on it; an output folder's is
named before anything is made."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, subprocess_env
from utils.errors import ConfigError
from utils.files.writable import name_too_long, why_not_writable
from utils.trackers.__main__ import sync

LONG = "n" * 300


def test_a_name_longer_than_the_file_system_allows_is_said_before_it_is_looked_at(tmp_path):
    assert "has a name of 300 bytes" in name_too_long(tmp_path / LONG / "x")
    assert "more than the" in name_too_long(tmp_path.joinpath(*["d" * 200] * 25))  # each name fits, the path not
    assert name_too_long(tmp_path / ("x" * 255)) is None
    assert "has a name of 300 bytes" in why_not_writable(tmp_path / LONG)
    with pytest.raises(ConfigError, match="has a name of 300 bytes"):  # python -m utils.trackers sync
        sync(tmp_path / LONG)


@pytest.mark.slow  # main.py runs, forked
def test_a_path_too_long_is_one_error_line_where_it_is_given_or_made(main_server, tmp_path):
    long = str(tmp_path / LONG)
    for args in (
        ["--mode", "test", "--checkpoint", f"{long}/best.pt"],
        ["--mode", "compare", long],
        [f"experiment.output_root={long}", "train.iterations=1"],
    ):
        proc = main_server.run(args, ROOT, subprocess_env(), 120)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "300 bytes" in errors[0] or "longer than its file system allows" in errors[0], errors[0]
    assert not any(tmp_path.iterdir())  # nothing made on the way
