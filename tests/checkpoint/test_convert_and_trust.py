"""Files read at the edges of the process, checkpoints: ``convert`` writes only a new file, outside every run and
outside its source; ``--trust-file`` covers one file or one sharded checkpoint directory, never a plain folder.

(A loaded config as a plain tree: tests/checkpoint/test_config_trees.py; timm, images and pretrained folders:
tests/checkpoint/test_weights_and_images.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import main
from tests.fixtures.crafted import RunsCommand, checkpoint_data, errors_of
from utils.checkpoint import convert
from utils.checkpoint.safe_load import is_trusted, trust_files
from utils.checkpoint.sharded import ShardedCheckpointStore


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A sharded checkpoint directory (convert's source), in a folder that is no run."""
    optimizer = {"state": {}, "param_groups": [{"lr": 0.1, "params": ["weight", "bias"]}]}
    return ShardedCheckpointStore(tmp_path_factory.mktemp("store")).save(checkpoint_data(optimizer=optimizer), 0, 1)


# -- F1: convert never overwrites, never writes into a run or into its source -------------------------------------


def test_convert_refuses_a_target_that_exists_or_lies_in_a_run_or_in_the_source(source, tmp_path, capsys):
    """It replaced another run's best.pt (no longer a hard link), or a file of the source (which then failed its checksum)."""
    run = tmp_path / "exp" / "run_001" / "checkpoints"
    run.mkdir(parents=True)
    (run / "epoch0000_batch000001.pt").write_bytes(b"the run's own")
    os.link(run / "epoch0000_batch000001.pt", run / "best.pt")
    (tmp_path / "taken.pt.sha256").write_text("0" * 64)
    cases = {
        run / "best.pt": f"target '{run / 'best.pt'}' exists; convert never overwrites a file",
        tmp_path / "taken.pt": f"target '{tmp_path / 'taken.pt.sha256'}' exists",
        source / "state.pt": f"target '{source / 'state.pt'}' exists",
        source / "new.pt": f"target '{source / 'new.pt'}' lies inside the source '{source}'",
        run / "new.safetensors": f"target '{run / 'new.safetensors'}' lies inside the run folder '{run.parent}'",
        tmp_path
        / "no"
        / "such"
        / "x.pt": f"the folder of target '{tmp_path / 'no' / 'such' / 'x.pt'}' does not exist; create it first",
    }
    sums = (source / "SHA256SUMS").read_bytes()
    for target, expected in cases.items():
        assert convert.main([str(source), str(target)]) == 2
        (line,) = errors_of(capsys)
        assert line.startswith(f"error: {expected}"), line
    assert (run / "best.pt").read_bytes() == b"the run's own" and os.stat(run / "best.pt").st_nlink == 2
    assert (
        not (run / "new.safetensors").exists()
        and not (source / "new.pt").exists()
        and (source / "SHA256SUMS").read_bytes() == sums
    )
    assert not (tmp_path / "no").exists()


# -- F4: --trust-file trusts one file or one sharded checkpoint directory -----------------------------------------


def test_trust_file_of_an_ordinary_folder_or_a_missing_path_is_refused(source, tmp_path, capsys):
    """--trust-file DIR trusted every file directly in any folder."""
    marker = tmp_path / "MARKER"
    folder = tmp_path / "downloads"
    folder.mkdir()
    torch.save(checkpoint_data(hooks={"x": RunsCommand(marker)}), folder / "crafted.pt")
    assert main.main(["--mode", "test", "--checkpoint", str(folder / "crafted.pt"), "--trust-file", str(folder)]) == 2
    assert errors_of(capsys) == [
        f"error: --trust-file '{folder}' is a folder, not a sharded checkpoint directory (no .metadata), and trust covers "
        "no other folder's files; name the file to trust itself"
    ]
    assert not marker.exists()
    missing = tmp_path / "nowhere.pt"
    assert main.main(["--mode", "test", "--checkpoint", str(folder / "crafted.pt"), "--trust-file", str(missing)]) == 2
    assert errors_of(capsys)[0].startswith(
        f"error: --trust-file '{missing}' does not exist; name the checkpoint or weights file to trust"
    )
    assert (
        convert.main([str(source), str(tmp_path / "c.pt"), "--trust-file", str(missing)]) == 2
        and len(errors_of(capsys)) == 1
    )
    try:
        trust_files([source])  # a sharded checkpoint directory covers the files directly in it
        assert is_trusted(source) and is_trusted(source / ".metadata") and not is_trusted(source.parent / "other.pt")
    finally:
        trust_files([])
