"""utils/files/owned.py on real folders: a link inside the owned folder is never written through or followed out."""

from __future__ import annotations

import os

import pytest

from utils.errors import LinkError
from utils.files.owned import make_dirs, open_fd, open_file, point_link, remove, remove_tree, write_text

SENTINEL = b"the user's\n"


@pytest.fixture
def planted(tmp_path):
    """An owned folder (reached through a link the user chose) and a file and a folder of the user's outside it."""
    (tmp_path / "scratch" / "run").mkdir(parents=True)
    os.symlink(tmp_path / "scratch", tmp_path / "output")  # the output root on scratch space: trusted
    users = tmp_path / "users"
    users.mkdir()
    (users / "file.txt").write_bytes(SENTINEL)
    return tmp_path / "output" / "run", users


def test_a_link_where_a_file_is_written_is_replaced_with_a_warning_and_its_target_kept(planted, caplog):
    run, users = planted
    for name, write in (
        ("log.txt", lambda path: open_file(run, path, "a").close()),
        ("config.yaml", lambda path: write_text(run, path, "new\n", "again")),
        (".lock", lambda path: os.close(open_fd(run, path, os.O_RDWR | os.O_CREAT))),
    ):
        os.symlink(users / "file.txt", run / name)
        write(run / name)
        assert not (run / name).is_symlink() and (run / name).is_file()
        assert f"'{run / name}' was a link (to '{users / 'file.txt'}')" in caplog.text
    assert (users / "file.txt").read_bytes() == SENTINEL


def test_a_link_where_a_folder_is_is_refused_and_removal_never_follows_one(planted):
    run, users = planted
    os.symlink(users, run / "checkpoints")
    with pytest.raises(LinkError, match=r"checkpoints' is a link \(to '.*users'\) where the run keeps a folder"):
        write_text(run, run / "checkpoints" / "last.pt.sha256", "x", "again")
    with pytest.raises(LinkError):
        make_dirs(run, run / "checkpoints" / "deeper")
    with pytest.raises(LinkError):
        remove(run, run / "checkpoints" / "file.txt")
    remove_tree(run, run / "checkpoints")  # the link itself goes
    (run / "tb").mkdir()
    os.symlink(users, run / "tb" / "inside")
    remove_tree(run, run / "tb")
    assert not (run / "checkpoints").exists() and not (run / "tb").exists()
    assert (users / "file.txt").read_bytes() == SENTINEL


def test_the_framework_s_own_links_point_to_a_name_beside_them_replaced_not_followed(planted):
    run, users = planted
    os.symlink(users, run / "latest")
    point_link(run, run / "latest", "run_002")
    assert os.readlink(run / "latest") == "run_002" and (users / "file.txt").read_bytes() == SENTINEL
    with pytest.raises(ValueError):
        point_link(run, run / "latest", "../elsewhere")


def test_a_relative_folder_owns_the_absolute_path_of_a_file_in_it(tmp_path, monkeypatch):
    """The default run folder is relative (output/...) and tempfile names its files absolutely: one folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "output" / "run").mkdir(parents=True)
    write_text("output/run", tmp_path / "output" / "run" / "a.txt", "x", "again")
    remove("output/run", tmp_path / "output" / "run" / "a.txt")
    remove(tmp_path / "output" / "run", "output/run/b.txt")
    assert not (tmp_path / "output" / "run" / "a.txt").exists()


def test_a_file_opened_in_place_is_the_run_s_own_regular_file(planted, caplog):
    """A hard link to a user's file (or a run copied with cp -al) is copied before it is appended to or truncated;
    a FIFO under the name is removed, not opened (which blocks); a folder there is refused in one line."""
    run, users = planted
    os.link(users / "file.txt", run / "log.txt")
    os.link(users / "file.txt", run / "metrics.jsonl")
    with open_file(run, run / "log.txt", "a") as fh:
        fh.write("appended\n")
    open_file(run, run / "metrics.jsonl", "w").close()
    assert (run / "log.txt").read_bytes() == SENTINEL + b"appended\n" and (run / "metrics.jsonl").read_bytes() == b""
    assert (users / "file.txt").read_bytes() == SENTINEL and os.stat(users / "file.txt").st_nlink == 1
    assert f"'{run / 'log.txt'}' has 2 other hard link(s)" in caplog.text
    os.mkfifo(run / ".lock")
    os.close(open_fd(run, run / ".lock", os.O_RDWR | os.O_CREAT))
    assert (run / ".lock").is_file() and f"'{run / '.lock'}' was not a regular file" in caplog.text
    (run / "tb").mkdir()
    with pytest.raises(LinkError, match="is a folder where the run writes a file"):
        open_file(run, run / "tb", "a")


def test_two_hosts_with_the_same_pid_write_under_other_temporary_names(tmp_path, monkeypatch):
    """A cache or home shared by containers of several nodes: their processes often have the same pids, and a
    temporary name of the pid alone lets one writer remove or rename the other's half-written file."""
    import socket

    from utils.files import owned

    names = []
    for host in ("node-a", "node-b", "node-a"):
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        names.append(owned.temporary_name(tmp_path / "stamp.json"))
    assert names[0] != names[1] and names[0] == names[2] and all(n.name.startswith(".stamp.json.") for n in names)
    owned.write_text(tmp_path, tmp_path / "stamp.json", "{}", "advice")  # written whole under the name, nothing left
    assert [p.name for p in tmp_path.iterdir()] == ["stamp.json"]
