"""The shard cache (``utils/data/shards/cache.py``) on local files standing for a remote store: what it keeps
within its limit, that it deletes only files it wrote, and the folders it refuses before a run starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import main
from tests.fixtures.outputs import one_error, read_only
from utils.data.shards.cache import ShardCache, ShardMismatch
from utils.data.shards.index import Shard
from utils.data.shards.reader import checked_cache_folder
from utils.data.shards.store import LocalStore
from utils.errors import ConfigError
from utils.files.checksum import file_digest


def remote_shards(folder: Path, count: int) -> tuple:
    """``count`` shards of 1000 bytes in a folder that stands for the remote store: (store, shards)."""
    source = LocalStore(str(folder))
    shards = []
    for n in range(count):
        path = source.path(f"s/{n}.tar")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([n]) * 1000)
        shards.append(Shard(f"{n}.tar", 1, file_digest(path), 1000))
    return source, shards


def test_the_cache_keeps_the_most_recently_used_shards_within_its_limit(tmp_path):
    source, shards = remote_shards(tmp_path / "remote", 4)
    cache = ShardCache(tmp_path / "cache", 2500, source.download)
    for n in (0, 1, 0, 2, 3):
        assert cache.get(shards[n], "s").read_bytes() == bytes([n]) * 1000
    cached = sorted(p.name.split("-")[-1] for p in (tmp_path / "cache").glob("*.tar"))
    assert cached == ["2.tar", "3.tar"]  # 0 and 1 evicted: least recently used first
    assert cache.get(shards[0], "s", if_room=True) is None  # full of shards in use: the reader reads by range
    assert cache.get(shards[3], "s", if_room=True) is not None  # a cached one is used as it is
    bad = Shard("0.tar", 1, "0" * 64, 1000)
    with pytest.raises(ShardMismatch):
        cache.get(bad, "s")


def test_the_cache_deletes_only_files_it_wrote_whatever_else_its_folder_holds(tmp_path):
    """A cache_dir shared with a user's files: eviction and the cleanup of dead downloads touch only the
    cache's own names (``<sha20>-<split>-<shard>.tar``, ``.<that>.<pid>.part``)."""
    source, shards = remote_shards(tmp_path / "remote", 4)
    folder = tmp_path / "cache"
    folder.mkdir()
    theirs = {
        "backup.tar": b"a user's archive" * 200,  # larger than the limit: it used to be evicted first
        ".backup.tar.999999999.part": b"a user's partial download",
        "notes.part": b"",
        "0123456789abcdef0123-s-9.tar.lock": b"",
        f"{shards[0].sha256[:20]}-s-0.tar.extra": b"x",
    }
    for name, data in theirs.items():
        (folder / name).write_bytes(data)
        os.utime(folder / name, (0, 0))  # the least recently used files of the folder
    (folder / "older.tar").mkdir()
    os.symlink(folder / "backup.tar", folder / f"{'f' * 20}-s-link.tar")  # the cache's name, but a link
    dead = folder / f".{shards[3].sha256[:20]}-s-3.tar.999999999.part"  # the cache's own, its process gone
    dead.write_bytes(b"cut short")
    cache = ShardCache(folder, 2500, source.download)
    for n in (0, 1, 2, 3):
        cache.get(shards[n], "s")
    assert {name: (folder / name).read_bytes() for name in theirs} == theirs
    assert (folder / "older.tar").is_dir() and (folder / f"{'f' * 20}-s-link.tar").is_symlink()
    assert sorted(p.name.split("-")[-1] for p in folder.glob("*-s-?.tar")) == ["2.tar", "3.tar"]
    assert not dead.exists()
    odd = Shard("0/../../x.tar", 1, shards[0].sha256, 1000)  # a name the cache would not keep: read by range
    assert cache.get(odd, "s", if_room=True) is None and not (tmp_path / "x.tar").exists()


def test_a_cache_folder_the_cache_cannot_write_is_one_line_before_any_run_folder(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    run = tmp_path / "out" / "apps" / "run_001"  # an earlier run, which latest names
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("{}")
    os.symlink("run_001", run.parent / "latest")
    root = "s3://bucket/prefix"  # nothing is read from it: the folder is checked first
    with read_only(tmp_path / "ro") as ro:
        cases = [
            (
                afile,
                f"data.args.cache_dir '{afile}' is a file; give data.args.cache_dir a folder the shard cache can write",
            ),
            (afile / "sub", f"lies under the file '{afile}'"),
            (ro, f"data.args.cache_dir '{ro}' is not writable ("),
            (ro / "sub", f"cannot be made: '{ro}' is not writable ("),
            (run / "cache", f"lies inside the run folder '{run}', whose files are the run's own"),
        ]
        for cache_dir, named in cases:
            with pytest.raises(ConfigError) as err:
                checked_cache_folder(root, str(cache_dir))
            assert named in str(err.value), str(err.value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(afile))  # the default folder: named, with the key that moves it
    with pytest.raises(ConfigError, match="the shard cache folder '.*' lies under the file .* set data.args.cache_dir"):
        checked_cache_folder(root, None)
    assert checked_cache_folder(root, str(tmp_path)) == tmp_path  # a folder holding other files: they are left alone
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    assert checked_cache_folder("s3://b/../../x/./y", None) == tmp_path / "home" / "regtrain-shards" / "b" / "x" / "y"

    before = sorted(p.name for p in run.parent.iterdir())
    args = ["data.name=shards", f"data.root={root}", f"data.args={{cache_dir: '{afile}'}}"]
    assert main.main([*args, f"experiment.output_root={tmp_path / 'out'}", "experiment.name=apps"]) == 2
    assert one_error(capsys).startswith(f"error: data.args.cache_dir '{afile}' is a file;")
    assert sorted(p.name for p in run.parent.iterdir()) == before and os.readlink(run.parent / "latest") == "run_001"
    assert afile.read_text() == "mine"
