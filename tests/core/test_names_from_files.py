"""Names read from files others made become output paths only inside their destination (utils/files/names.py)."""

from __future__ import annotations

import os

import pytest
import torch

from utils.checkpoint.records import ValidationRecord, validator_as_of
from utils.commands.predict import _mask_paths
from utils.errors import CheckpointError, DataError
from utils.files.names import inside, plain_name, relative_name
from utils.metrics.sod import SaliencyWriter
from utils.run.folder import RunFolder


@pytest.mark.parametrize(
    "name, relative, plain",
    [
        ("a.png", True, True),
        ("cls/a.png", True, False),
        ("./a.png", True, False),
        ("../a.png", False, False),
        ("cls/../../a.png", False, False),
        ("/etc/passwd", False, False),
        ("", False, False),
        (".", False, False),
        ("a\0b", False, False),
        (7, False, False),
        (None, False, False),
    ],
)
def test_which_names_stay_below_their_folder(name, relative, plain):
    assert relative_name(name) is relative and plain_name(name) is plain


def test_inside_refuses_names_that_leave_the_destination_and_links_that_lead_out(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    assert inside(dest, "cls/a.png", "index 'i.json'") == dest / "cls" / "a.png"
    for name in ("../x.png", "/abs/x.png", "a/../../x.png"):
        with pytest.raises(DataError, match=f"index 'i.json' names '{name}', which would be written outside"):
            inside(dest, name, "index 'i.json'")
    (dest / "masks").symlink_to(tmp_path)  # a folder inside that leads away
    with pytest.raises(DataError, match="would be written outside"):
        inside(dest, "masks/x.png", "index 'i.json'")


def test_saliency_maps_named_by_a_crafted_stem_are_not_written(tmp_path):
    writer = SaliencyWriter(tmp_path / "predictions")
    targets = {"name": ["../escaped"], "mask": torch.zeros(1, 1, 4, 4), "original": [torch.zeros(4, 4)]}
    with pytest.raises(DataError, match="the sample name of a saliency map names '../escaped.png'"):
        writer(None, torch.zeros(1, 1, 4, 4), targets)
    assert not (tmp_path / "escaped.png").exists()


def test_predict_refuses_a_mask_name_that_leaves_its_folder_before_writing(tmp_path):
    class Source:
        keys = ["ok.png", "../../x.png"]  # a pack's keys, from its index

    class Dataset:
        source, paths = Source(), ["s3://b/p/test:ok.png", "s3://b/p/test:../../x.png"]

    with pytest.raises(DataError, match=r"input 's3://b/p/test:../../x.png' names '../../x.png'"):
        _mask_paths(RunFolder(tmp_path), Dataset())
    assert not (tmp_path / "masks").exists()


def test_a_best_checkpoint_named_outside_its_folder_is_refused(tmp_path):
    checkpoint = tmp_path / "epoch0001_batch000000.pt"
    good = ValidationRecord(1, 10, {"top1": 0.5}, {"file": "epoch0001_batch000000.pt"})
    assert validator_as_of(checkpoint, good, {}.get)["file"] == "epoch0001_batch000000.pt"
    older = {"checkpointer": {"best": "epoch0000_batch000000.pt"}}.get  # as an older version saved it
    assert validator_as_of(checkpoint, None, older)["file"] == "epoch0000_batch000000.pt"
    crafted = ValidationRecord(1, 10, {"top1": 0.5}, {"file": "../../../victim.pt"})
    with pytest.raises(CheckpointError, match=r"names its best checkpoint '../../../victim.pt', not a file of"):
        validator_as_of(checkpoint, crafted, {}.get)
    with pytest.raises(CheckpointError, match="names its best checkpoint '/etc/x'"):
        validator_as_of(checkpoint, None, {"validator": {"file": "/etc/x"}}.get)
    assert os.listdir(tmp_path) == []
