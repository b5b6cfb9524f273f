"""Checkpoint files: keep the last K, fall back from a truncated or corrupt file, survive a failed write."""

from __future__ import annotations

import errno
import os

import pytest
import torch

import main
from tests.conftest import fast_overrides
from utils.checkpoint import files
from utils.checkpoint import store as store_module
from utils.checkpoint.store import CheckpointStore, load_verified
from utils.errors import CheckpointError


def state(value: float) -> dict:
    return {"model": {"w": torch.full((64, 64), value)}, "epoch": int(value)}


def test_keeps_the_last_k_and_points_last_at_the_newest(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for epoch in range(1, 5):
        store.save(state(epoch), epoch, 0)
    assert [p.name for p in store.numbered()] == ["epoch0004_batch000000.pt", "epoch0003_batch000000.pt"]
    assert load_verified(tmp_path / "last.pt")["epoch"] == 4
    assert sorted(p.name for p in tmp_path.glob("*.sha256")) == [
        "epoch0003_batch000000.pt.sha256",
        "epoch0004_batch000000.pt.sha256",
        "last.pt.sha256",
    ]


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog, damage):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(state(1), 1, 0)
    newest = store.save(state(2), 1, 5)
    data = bytearray(newest.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:  # one flipped byte in the tensor data: the file still loads, the checksum catches it
        data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    chosen = store.latest_usable()  # what --resume continues from
    assert chosen == tmp_path / "epoch0001_batch000000.pt"
    assert load_verified(chosen)["epoch"] == 1
    assert "checksum mismatch" in caplog.text and "falling back" in caplog.text


def test_only_corrupt_checkpoints_is_one_clear_error(tmp_path):
    store = CheckpointStore(tmp_path)
    path = store.save(state(1), 1, 0)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="no usable checkpoint"):
        store.latest_usable()


def test_a_failed_write_keeps_the_previous_checkpoint_and_says_so(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path)
    first = store.save(state(1), 1, 0)

    def disk_full(obj, fh, *args, **kwargs):
        fh.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(CheckpointError, match=r"No space left on device.*'.*epoch0001_batch000000.pt' is intact"):
        store.save(state(2), 2, 0)
    monkeypatch.undo()
    assert load_verified(first)["epoch"] == 1 and load_verified(tmp_path / "last.pt")["epoch"] == 1
    assert [p.name for p in store.numbered()] == [first.name]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_run_whose_checkpoint_write_fails_stops_with_one_message(out_root, monkeypatch, capsys):
    args = fast_overrides(out_root, "full", epochs=2)
    assert main.main(args) == 0
    ckpt_dir = out_root / "full" / "latest" / "checkpoints"
    before = load_verified(ckpt_dir / "last.pt")

    def no_permission(obj, fh, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(torch, "save", no_permission)
    assert main.main([*args, "train.epochs=3", "--resume", str(out_root / "full" / "run_001")]) == 2
    err = capsys.readouterr().err
    assert "error: could not write checkpoint" in err and "Permission denied" in err and "Traceback" not in err
    monkeypatch.undo()
    after = load_verified(ckpt_dir / "last.pt")
    assert after["progress"]["epoch"] == before["progress"]["epoch"] == 2
    assert all(torch.equal(after["model"][k], v) for k, v in before["model"].items())


def test_one_write_per_checkpoint_point_best_and_last_are_links_hashed_while_written(tmp_path, monkeypatch):
    saves = []
    real_save = torch.save
    monkeypatch.setattr(torch, "save", lambda obj, f, *a, **k: saves.append(obj) or real_save(obj, f, *a, **k))
    monkeypatch.setattr(files, "file_digest", lambda path: pytest.fail(f"{path} was read back to hash it"))
    store = CheckpointStore(tmp_path, keep=2)
    store.best = "epoch0001_batch000000.pt"
    path = store.save(state(1), 1, 0)
    assert len(saves) == 1
    assert os.path.samefile(path, tmp_path / "best.pt") and os.path.samefile(path, tmp_path / "last.pt")
    monkeypatch.undo()
    digest = (tmp_path / "epoch0001_batch000000.pt.sha256").read_text()
    assert digest == files.file_digest(path) == (tmp_path / "best.pt.sha256").read_text()
    assert load_verified(tmp_path / "best.pt")["epoch"] == 1


def test_rotation_keeps_the_file_best_pt_links_to(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    store.best = "epoch0001_batch000000.pt"
    for epoch in (1, 2, 3):
        store.save(state(epoch), epoch, 0)
    assert [p.name for p in store.numbered()] == ["epoch0003_batch000000.pt", "epoch0001_batch000000.pt"]
    assert os.path.samefile(tmp_path / "best.pt", tmp_path / "epoch0001_batch000000.pt")
    store.best = "epoch0004_batch000000.pt"  # a new best: the old one rotates away
    store.save(state(4), 4, 0)
    assert [p.name for p in store.numbered()] == ["epoch0004_batch000000.pt"]
    assert sorted(p.name for p in tmp_path.glob("*.sha256")) == [
        "best.pt.sha256",
        "epoch0004_batch000000.pt.sha256",
        "last.pt.sha256",
    ]


def test_a_copy_where_the_file_system_has_no_hard_links(tmp_path, monkeypatch, caplog):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(store_module.os, "link", no_links)
    store = CheckpointStore(tmp_path)
    store.best = "epoch0001_batch000000.pt"
    path = store.save(state(1), 1, 0)
    assert "no hard links" in caplog.text
    assert not os.path.samefile(path, tmp_path / "best.pt") and store.links_to("best.pt", path)
    assert load_verified(tmp_path / "best.pt")["epoch"] == 1 and store.best_path() == tmp_path / "best.pt"


def test_resume_relinks_best_pt_to_the_file_the_state_names(tmp_path, caplog):
    store = CheckpointStore(tmp_path, keep=3)
    store.best = "epoch0001_batch000000.pt"
    store.save(state(1), 1, 0)
    store.best = "epoch0002_batch000000.pt"
    store.save(state(2), 2, 0)
    store.link(tmp_path / "epoch0001_batch000000.pt", "best.pt")  # as if the crash came before best.pt moved
    resumed = CheckpointStore(tmp_path, keep=3)
    resumed.best = "epoch0002_batch000000.pt"  # what the newest file's state says
    resumed.repair_best()
    assert "linking it now" in caplog.text
    assert (
        os.path.samefile(tmp_path / "best.pt", tmp_path / "epoch0002_batch000000.pt")
        and resumed.best_path() == tmp_path / "best.pt"
    )


def test_a_link_renamed_before_its_checksum_still_verifies(tmp_path):
    store = CheckpointStore(tmp_path)
    store.best = "epoch0001_batch000000.pt"
    store.save(state(1), 1, 0)
    store.best = "epoch0002_batch000000.pt"
    path = store.save(state(2), 2, 0)
    os.link(tmp_path / "epoch0001_batch000000.pt.sha256", tmp_path / ".stale")
    os.replace(tmp_path / ".stale", tmp_path / "best.pt.sha256")  # best.pt is new, its own checksum old
    assert os.path.samefile(tmp_path / "best.pt", path) and load_verified(tmp_path / "best.pt")["epoch"] == 2


def test_without_a_best_the_run_says_it_tests_last_pt(tmp_path, caplog):
    store = CheckpointStore(tmp_path)
    store.save(state(1), 1, 0)
    store.best = "epoch0000_batch000009.pt"  # named by a fallback state whose best was rotated away
    store.repair_best()
    assert store.best is None and "no longer exists" in caplog.text
    assert store.best_path() == tmp_path / "last.pt" and "testing" in caplog.text


def test_the_file_rotation_removes_is_rewritten_in_place_and_nothing_else_is(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path, keep=2)
    store.save({"model": {"w": torch.zeros(256, 256)}, "epoch": 1}, 1, 0)  # longer than the files that follow
    store.save(state(2), 2, 0)
    inode = lambda epoch: (tmp_path / f"epoch{epoch:04d}_batch000000.pt").stat().st_ino  # noqa: E731
    first, second = inode(1), inode(2)

    seen = {}
    real_serialize = files._serialize

    def watching(obj, fd):  # while the new file is written, the newest complete one is whole
        seen["names"] = [p.name for p in store.numbered()]
        seen["epochs"] = [load_verified(p)["epoch"] for p in store.numbered()]
        return real_serialize(obj, fd)

    monkeypatch.setattr(files, "_serialize", watching)
    store.save(state(3), 3, 0)  # rotation removes epoch 1: its file becomes epoch 3's
    assert seen == {"names": ["epoch0002_batch000000.pt"], "epochs": [2]}
    assert inode(3) == first and load_verified(tmp_path / "epoch0003_batch000000.pt")["epoch"] == 3
    # the old tail is cut
    assert (tmp_path / "epoch0003_batch000000.pt").stat().st_size == (
        tmp_path / "epoch0002_batch000000.pt"
    ).stat().st_size
    assert sorted(p.name for p in tmp_path.glob("*.sha256")) == [
        "epoch0002_batch000000.pt.sha256",
        "epoch0003_batch000000.pt.sha256",
        "last.pt.sha256",
    ]

    store.best = "epoch0002_batch000000.pt"  # best.pt's file is kept by rotation, and never rewritten
    store.save(state(4), 4, 0)
    assert inode(4) not in (first, second) and load_verified(tmp_path / "epoch0002_batch000000.pt")["epoch"] == 2

    store.best = None
    # another name links it: never rewritten
    os.link(tmp_path / "epoch0002_batch000000.pt", tmp_path / "kept_by_hand.pt")
    store.save(state(5), 5, 0)  # rotation removes epochs 2 and 3; epoch 3's file is rewritten
    assert inode(5) == first and torch.load(tmp_path / "kept_by_hand.pt", weights_only=False)["epoch"] == 2
    assert [p.name for p in store.numbered()] == ["epoch0005_batch000000.pt", "epoch0004_batch000000.pt"]


def test_a_checkpoint_without_its_checksum_is_deserialized_once_to_resume(tmp_path, monkeypatch):
    """latest_usable read such a file whole to check it, and the resume read it again."""
    from tests.fixtures.crafted import checkpoint_data
    from utils.checkpoint import state as state_module
    from utils.checkpoint.files import sidecar
    from utils.checkpoint.resume_point import checkpoint_to_resume
    from utils.run.folder import RunFolder

    run = RunFolder(tmp_path / "run")
    store = CheckpointStore(run.checkpoints)
    path = store.save(checkpoint_data(), 0, 1)
    for side in run.checkpoints.glob("*.sha256"):
        side.unlink()
    assert not sidecar(path).exists()
    reads = []

    def counted(file):
        reads.append(os.path.basename(file))
        return files_load(file)

    files_load = store_module.load_file
    monkeypatch.setattr(store_module, "load_file", counted)
    monkeypatch.setattr(state_module, "load_file", counted)
    chosen = checkpoint_to_resume(run, None, required=True)
    assert chosen.path == path and chosen.loaded.source == str(path)
    assert reads == [path.name]
