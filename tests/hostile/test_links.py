"""Links in a handed run or experiment folder, at every path a command writes (``plant.PLANTED``): the real
command runs, and what each link points to outside is byte for byte as it was, nothing outside is deleted, and the
run ends as ``utils/files/owned.py`` says (exit 0 with a warning naming each link it replaced, or exit 2 with one
``error:`` line naming the link), never with a traceback. The links of one command share one run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.forked_main import MainServer
from tests.hostile.plant import PLANTED, Planted, contents, plant
from utils.data.shards.cache import ShardCache
from utils.data.shards.index import Shard
from utils.data.shards.store import LocalStore
from utils.files.checksum import file_digest
from utils.trackers.spool import Spool

SETTINGS = [
    "experiment.name=e",
    "threads=1",
    "model.args.backbone_args={widths: [8, 16]}",
    "train.checkpoint_every_steps=2",
    "train.record_samples=true",
]
TIMEOUT = 180


@pytest.fixture(scope="module")
def server(main_server: MainServer) -> MainServer:
    return main_server


def run(server: MainServer, out: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = server.run([f"experiment.output_root={out}", *SETTINGS, *extra], ROOT, subprocess_env(), TIMEOUT)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def base(server, tmp_path_factory) -> Path:
    """A finished run folder: checkpoints of batches 4 and 6 (the newest validated), the run's files."""
    out = tmp_path_factory.mktemp("base")
    assert run(server, out, "train.iterations=6").returncode == 0
    return out / "e" / "run_001"


def handed(base: Path, out: Path) -> Path:
    """A copy of ``base`` as ``<out>/e/run_001``: a run folder someone handed over."""
    folder = out / "e" / "run_001"
    shutil.copytree(base, folder, symlinks=True)
    return folder


def planted(command: str, outcome: str) -> List[Planted]:
    found = [entry for entry in PLANTED if entry.command == command and entry.outcome == outcome]
    assert found
    return found


@pytest.mark.slow  # main.py runs, forked
def test_a_resume_replaces_each_link_where_it_writes_a_file_and_writes_nothing_through_it(server, base, tmp_path):
    (tmp_path / "scratch").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "scratch")  # the output root on scratch space: the user's own link
    folder = handed(base, tmp_path / "out")
    targets = {entry.path: plant(folder, entry, tmp_path) for entry in planted("resume", "replaced")}
    before = {path: contents(target) for path, target in targets.items()}
    proc = run(server, tmp_path / "out", "--resume", str(folder), "train.iterations=10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "training state restored: epoch 0, step 6" in proc.stdout + proc.stderr
    assert {path: contents(target) for path, target in targets.items()} == before  # nothing written through
    # each writer met its link and replaced it, naming it: the lock, the logs, the config, the records, a checkpoint
    # and last.pt (a link removed before its name is written, a record or a checksum without its file, just goes)
    replaced = ".lock log.txt config.yaml metrics.jsonl samples.jsonl checkpoints/last.pt checkpoints/last.pt.sha256"
    replaced += " checkpoints/epoch0000_batch000008.pt"
    for path in replaced.split():
        assert (folder / path).is_file() and not (folder / path).is_symlink(), path
        assert f"'{folder / path}' was a link (to '{targets[path]}')" in proc.stderr, path
    assert not (folder / "checkpoints" / "epoch0000_batch000002.pt").exists()  # rotated: the link itself removed
    assert (tmp_path / "target_run_checkpoints_epoch0000_batch000002.pt").is_file()


@pytest.mark.slow  # main.py runs, forked
@pytest.mark.parametrize("entry", planted("resume", "refused"), ids=lambda entry: entry.path)
def test_a_resume_refuses_a_link_where_the_run_keeps_a_folder(server, base, tmp_path, entry):
    folder = handed(base, tmp_path / "out")
    target = plant(folder, entry, tmp_path)
    before, lock = contents(target), (folder / ".lock").read_bytes()
    proc = run(server, tmp_path / "out", "--resume", str(folder), "train.iterations=10")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert f"'{folder / entry.path}' is a link (to '{target}')" in errors[0]
    assert contents(target) == before and (folder / ".lock").read_bytes() == lock  # refused before any write


@pytest.mark.slow  # main.py runs, forked
def test_links_in_a_handed_experiment_folder_are_passed_over_or_replaced_never_followed(server, base, tmp_path):
    out = tmp_path / "out"
    folder = handed(base, out)
    entries = planted("train", "replaced") + planted("train", "passed over") + planted("test", "passed over")
    targets: Dict[str, Path] = {entry.path: plant(folder.parent, entry, tmp_path) for entry in entries}
    shutil.copytree(base, targets["run_002"], dirs_exist_ok=True)  # a run with checkpoints: --resume would take it
    before = {path: contents(target) for path, target in targets.items()}
    resumed = run(server, out, "--resume")  # what --resume alone continues: the experiment's newest run, run_001
    assert resumed.returncode == 2 and "(the newest, run_001, tested its best checkpoint)" in resumed.stderr
    fresh = run(server, out, "train.iterations=2")
    assert fresh.returncode == 0 and (folder.parent / "run_003" / "checkpoints").is_dir(), fresh.stderr[-3000:]
    assert (folder.parent / "latest").readlink() == Path("run_003")  # the framework's own link, repointed
    tested = run(server, out, "--mode", "test", "--checkpoint", str(folder / "checkpoints" / "best.pt"))
    assert tested.returncode == 0 and (folder.parent / "test_002").is_dir(), tested.stderr[-3000:]
    assert {path: contents(target) for path, target in targets.items()} == before
    assert (folder.parent / "run_002").is_symlink() and (folder.parent / "test_001").is_symlink()


@pytest.mark.slow  # main.py runs, forked
@pytest.mark.parametrize("entry", planted("sweep", "refused"), ids=lambda entry: entry.path)
def test_a_sweep_refuses_a_link_at_its_folder_or_its_journal(server, tmp_path, entry):
    target = plant(tmp_path / "out" / "e", entry, tmp_path)
    before = contents(target)
    (tmp_path / "links.yaml").write_text("space: {optim.lr: {grid: [0.01]}}\ntrials: 1\n")
    proc = run(server, tmp_path / "out", "--sweep", str(tmp_path / "links.yaml"))
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert f"'{tmp_path / 'out' / 'e' / entry.path}' is a link (to '{target}')" in errors[0]
    assert contents(target) == before


def test_the_shard_cache_fetches_a_shard_again_in_place_of_a_link_and_writes_nothing_through_it(tmp_path):
    """The real cache over a local store (standing for a remote one), its folder reached through a link."""
    remote = LocalStore(str(tmp_path / "remote"))
    (tmp_path / "remote" / "s").mkdir(parents=True)
    (tmp_path / "remote" / "s" / "0.tar").write_bytes(b"shard bytes" * 100)
    shard = Shard("0.tar", 1, file_digest(tmp_path / "remote" / "s" / "0.tar"), 1100)
    (tmp_path / "scratch").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "scratch")  # cache_dir itself: the user's to place
    cache = ShardCache(tmp_path / "cache", 10_000, remote.download)
    name = cache.file(shard, "s").name
    entries = planted("cache", "replaced")
    targets = {entry.path: plant(tmp_path / "cache", entry._replace(path=entry.path.format(shard=name)), tmp_path)
               for entry in entries}  # fmt: skip
    before = {path: contents(target) for path, target in targets.items()}
    got = cache.get(shard, "s")
    assert got is not None and not got.is_symlink() and got.read_bytes() == b"shard bytes" * 100
    assert not (tmp_path / "cache" / f"{name}.lock").is_symlink()
    assert {path: contents(target) for path, target in targets.items()} == before


def test_a_tracker_s_spool_replaces_a_linked_records_or_identity_file_and_writes_nothing_through_it(tmp_path):
    run_folder = tmp_path / "run_001"
    (run_folder / "trackers").mkdir(parents=True)
    targets = {entry.path: plant(run_folder, entry, tmp_path) for entry in planted("spool", "replaced")}
    targets["trackers/mlflow.jsonl"].write_bytes(b"{\"a user's line cut short")  # the spool cuts such a line
    targets["trackers/mlflow.json"].write_bytes(b"{}")  # an identity that reads (what it holds: tests of its own)
    before = {path: contents(target) for path, target in targets.items()}
    spool = Spool(run_folder / "trackers", "mlflow")
    spool.append({"metric": "train/loss", "value": 1.0, "step": 1})
    spool.save_identity(run_id="r1")
    spool.close()
    assert {path: contents(target) for path, target in targets.items()} == before
    assert not any((run_folder / path).is_symlink() for path in targets)


@pytest.mark.slow  # main.py runs, forked
def test_a_resume_of_a_hard_linked_copy_leaves_the_original_and_opens_no_fifo(server, base, tmp_path):
    """A run copied with ``cp -al`` (each file a hard link of the original's): appending, truncating and locking
    copy a file first (``owned._own_inode``); a FIFO where a checkpoint or the lock is, is passed over or replaced
    (opening one blocks); bytes that are not UTF-8 in metrics.jsonl are a damaged line, not a traceback."""
    original = handed(base, tmp_path / "orig")
    folder = tmp_path / "out" / "e" / "run_001"
    shutil.copytree(original, folder, symlinks=True, copy_function=os.link)
    before = contents(original)
    for name in (".lock", "checkpoints/epoch0000_batch000006.pt"):
        (folder / name).unlink()
        os.mkfifo(folder / name)
    metrics = (folder / "metrics.jsonl").read_bytes()
    (folder / "metrics.jsonl").unlink()
    (folder / "metrics.jsonl").write_bytes(metrics + b'\xff\xfe{"split": "val"}\n')
    proc = run(server, tmp_path / "out", "--resume", str(folder), "train.iterations=8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "training state restored: epoch 0, step 4" in proc.stdout + proc.stderr
    assert contents(original) == before
    assert f"'{folder / 'log.txt'}' has 1 other hard link(s)" in proc.stderr  # samples.jsonl: rewound whole
    assert f"'{folder / 'checkpoints' / 'epoch0000_batch000006.pt'}' is no checkpoint file" in proc.stderr
    assert (folder / ".lock").is_file() and b"\xff" not in (folder / "metrics.jsonl").read_bytes()
