"""The readers under the datasets (``utils/data/sources/``): a folder and its pack give the same samples through
one interface, and a reading argument the opened kind has no use for is said once to do nothing."""

from __future__ import annotations

import logging

import pytest
import torch

from tests.apps.conftest import make_digit_folder
from tests.shards.packs import pack
from utils.data.datasets.image_folder import ImageFolder
from utils.data.sources.class_folders import ClassFolders
from utils.data.sources.pack import PackedSplit


@pytest.mark.slow  # packs through main.py: about 6 s
def test_a_folder_and_its_pack_read_alike_through_their_sources_and_an_unused_argument_warns_once(
    tmp_path, capsys, caplog
):
    data = make_digit_folder(tmp_path / "data", {"train": 6, "val": 6})
    pack(capsys, tmp_path / "p", "data.name=image_folder", f"data.root={data}", "data.args={channels: 1}")
    caplog.set_level(logging.WARNING)
    for _ in range(2):  # each split, and each loader worker, opens its source again
        files = ImageFolder("val", str(data), channels=1, shuffle_window=4).source
    packed = ImageFolder("val", str(tmp_path / "p"), channels=1).source
    assert isinstance(files, ClassFolders) and isinstance(packed, PackedSplit) and len(files) == len(packed) == 6
    assert files.keys.tolist() == packed.keys.tolist() and files.labels.tolist() == packed.labels.tolist()
    assert files.classes == packed.classes and files.num_classes == packed.num_classes == 3
    assert all(torch.equal(files.image(at, 1), packed.image(at, 1)) for at in range(6))
    first = data / "val" / files.keys[0]
    assert files.members(0) == [("png", first)] and packed.members(0) == [("png", first.read_bytes())]
    assert files.file(0) == str(first) and packed.file(0) is None  # a pack's sample lies in no file of its own
    warned = [record.getMessage() for record in caplog.records if "does nothing" in record.getMessage()]
    assert warned == [f"data.args.shuffle_window=4 does nothing: data.root '{data}' is a folder of files, not a pack"]
