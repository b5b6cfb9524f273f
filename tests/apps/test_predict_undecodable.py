"""A file name that is not UTF-8 (``\\xff\\xfe.png``, real on old shares): predict writes its row with the name's
bytes as ``\\xNN`` (``utils/undecodable.py``), from a folder and from a pack of it; no traceback, no temporary file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import main
from tests.apps.test_predict import read_csv

ODD = os.fsdecode(b"\xff\xfe.png")  # the name as Python gives it: each undecodable byte a lone surrogate


def leftovers(folder: Path) -> list:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.slow  # packs a folder and predicts twice
def test_a_name_that_is_not_utf8_is_written_as_its_bytes_from_a_folder_and_from_a_pack(trained, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(trained["data"], data)
    source = next((data / "test" / "zero").glob("*.png"))
    shutil.copyfile(source, data / "test" / "zero" / ODD)
    checkpoint = str(trained["checkpoint"])

    folder_run = tmp_path / "from_folder"
    args = ["--mode", "predict", "--checkpoint", checkpoint, "--input", str(data / "test"), "--output", str(folder_run)]
    assert main.main(args) == 0
    rows = read_csv(folder_run / "predictions.csv")
    assert str(data / "test" / "zero" / "\\xff\\xfe.png") in [r["path"] for r in rows]
    assert not leftovers(folder_run)

    packed = tmp_path / "packed"
    assert main.main(["--mode", "pack", "--output", str(packed), "data.name=image_folder", f"data.root={data}"]) == 0
    shard_run = tmp_path / "from_pack"
    args = [
        "--mode",
        "predict",
        "--checkpoint",
        checkpoint,
        "--input",
        str(packed / "test"),
        "--output",
        str(shard_run),
    ]
    assert main.main(args) == 0
    shard_rows = read_csv(shard_run / "predictions.csv")
    assert f"{packed / 'test'}:zero/\\xff\\xfe.png" in [r["path"] for r in shard_rows]
    # the same image from the folder and from its pack: the same prediction
    by_name = {Path(r["path"]).name: r["prediction"] for r in rows}
    assert {r["path"].rsplit("/", 1)[-1]: r["prediction"] for r in shard_rows} == by_name
    assert not leftovers(shard_run) and "Traceback" not in capsys.readouterr().err
