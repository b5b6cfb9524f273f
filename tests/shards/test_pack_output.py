"""Where ``--mode pack`` refuses to write, before it reads or writes anything: inside the data it packs, inside a run
folder, a folder it cannot write."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict

import pytest

import main
from tests.apps.conftest import make_digit_folder
from tests.fixtures.outputs import one_error, read_only, small_disk
from utils.commands.pack import check_output
from utils.errors import ConfigError


def snapshot(folder: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow  # packs until a small disk is full: about 3 s
def test_an_output_inside_the_data_or_a_run_or_unwritable_is_one_line_and_nothing_is_written(tmp_path, capsys):
    data = make_digit_folder(tmp_path / "digits")
    os.symlink(data / "train", tmp_path / "link")  # the data through a link
    run = tmp_path / "out" / "apps" / "run_001"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("{}")
    in_data = f"is or lies inside data.root '{data}', the data being packed"
    cases = [
        (data / "packed", in_data),  # a new split of the data
        (data / "train" / "packed", in_data),  # a new class of its training split
        (tmp_path / "link" / "packed", in_data),
        (run / "packed", f"lies inside the run folder '{run}'; --mode pack never writes into a run"),
    ]
    before = snapshot(tmp_path)
    with read_only(tmp_path / "ro") as ro:
        cases.append((ro / "packed", f"cannot be made: '{ro}' is not writable ("))
        for output, named in cases:
            args = ["--mode", "pack", "--output", str(output), "data.name=image_folder", f"data.root={data}"]
            assert main.main(args) == 2
            line = one_error(capsys)
            assert line.startswith(f"error: --output '{output}' {named}"), line
        assert not (ro / "packed").exists()
    assert snapshot(tmp_path) == before and not (tmp_path / "link" / "packed").exists()
    assert "give --mode pack a new or empty folder it can write" in line
    with pytest.raises(ConfigError, match="inside data.root 's3://b/d/'"):
        check_output("s3://b/d/packed", "s3://b/d/")
    check_output("s3://b/d2", "s3://b/d")  # a prefix beside it
    check_output(str(tmp_path / "digits2"), str(data))
    with small_disk(tmp_path / "small", "16k") as small:  # room for a few samples: the disk fills while packing
        args = ["--mode", "pack", "--output", str(small / "p"), "data.name=image_folder", f"data.root={data}"]
        assert main.main(args) == 2
        assert one_error(capsys).startswith(
            f"error: could not write '{small / 'p' / 'train'}' (No space left on device)"
        )
