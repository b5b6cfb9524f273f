"""Links planted where the framework writes, and the outside files and folders they point to.

``PLANTED`` registers every path a command writes, truncates, renames or removes under a folder it owns; a new
writer joins by adding one entry. ``test_links.py`` plants a link at each one in a real folder (all of a command's
at once), runs the real command and checks that what the links point to is byte for byte as it was
(``utils/files/owned.py``): a link where a file goes is replaced (a warning names it), a link where a folder goes
is refused (one ``error:`` line), a link where the experiment keeps its runs is passed over.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, NamedTuple, Tuple

SENTINEL = b"a user's own file: never written through a link\n"


class Planted(NamedTuple):
    """A path ``command`` writes under the folder it owns (``where``), and what a link planted there must get."""

    command: str  # "resume": --resume of a handed run folder; "train", "test", "sweep": in a handed experiment folder
    where: str  # the folder ``path`` is relative to: "run", "experiment" or "cache" (data.args.cache_dir)
    # ("spool", "cache": the writer itself, on a real folder: a tracker's spool, the shard cache)
    path: str
    points_to: str  # what the link points to: "file" or "folder"
    outcome: str  # "replaced" (a warning names it), "refused" (one error line), "passed over" (another name used)


def _files(command: str, paths: str) -> Tuple[Planted, ...]:
    return tuple(Planted(command, "run", path, "file", "replaced") for path in paths.split())


# the base run of test_links.py stops at batch 6 (checkpoints 4 and 6 kept); its resume saves at 8 and 10
PLANTED: Tuple[Planted, ...] = (
    *_files("resume", ".lock log.txt config.yaml metrics.jsonl samples.jsonl"),  # the lock; appended; rewritten
    # utils/checkpoint/store.py: the checkpoint resumed from and one rotated away (a recycled file is rewritten in
    # place), the names the resumed run writes, their checksums and records, last.pt and best.pt
    *_files("resume", "checkpoints/epoch0000_batch000002.pt checkpoints/epoch0000_batch000002.pt.sha256"),
    *_files("resume", "checkpoints/epoch0000_batch000006.pt checkpoints/epoch0000_batch000008.pt"),
    *_files("resume", "checkpoints/epoch0000_batch000010.pt.sha256 checkpoints/epoch0000_batch000010.pt.val.json"),
    *_files("resume", "checkpoints/last.pt checkpoints/last.pt.sha256"),
    *_files("resume", "checkpoints/best.pt checkpoints/best.pt.sha256"),  # read by the final test, relinked
    Planted("resume", "run", "checkpoints", "folder", "refused"),  # every checkpoint write and rotation
    Planted("resume", "run", "tb", "folder", "refused"),  # TensorBoard's events (utils/log.py)
    Planted("resume", "run", "trackers", "folder", "refused"),  # the trackers' spool (utils/trackers/spool.py)
    Planted("resume", "run", "profile", "folder", "refused"),  # utils/hook/profiler.py
    Planted("resume", "run", "predictions", "folder", "refused"),  # a saliency test's maps (utils/metrics/sod.py)
    # utils/run/latest.py: the framework's own link, repointed by a new run (replaced, never followed)
    Planted("train", "experiment", "latest", "folder", "replaced"),
    # a run folder that is a link (to a copy of a run): --resume alone continues run_001, a new run takes run_003
    Planted("train", "experiment", "run_002", "folder", "passed over"),
    Planted("test", "experiment", "test_001", "folder", "passed over"),  # --mode test takes test_002
    Planted("sweep", "experiment", "sweep_links", "folder", "refused"),  # utils/sweep/driver.py: the sweep's folder
    # its study journal, which Optuna appends to by name: the study itself, refused rather than started afresh
    Planted("sweep", "experiment", "sweep_links/study.journal", "file", "refused"),
    # utils/data/shards/cache.py (``{shard}``: the cache's name of a shard): a link at a shard's name is fetched
    # again in its place (never read as the shard, never evicted through), its lock is the cache's own
    Planted("cache", "cache", "{shard}", "file", "replaced"),
    Planted("cache", "cache", "{shard}.lock", "file", "replaced"),
    # utils/trackers/spool.py: a tracker's records (appended; a cut last line truncated) and its identity (rewritten)
    Planted("spool", "run", "trackers/mlflow.jsonl", "file", "replaced"),
    Planted("spool", "run", "trackers/mlflow.json", "file", "replaced"),
)
# --mode pack, predict and export write only into a new or empty folder (``--output``, or a new <mode>_NNN), and a
# test into a new test_NNN: nothing a link could be planted at exists inside before they run


def plant(root: Path, entry: Planted, base: Path) -> Path:
    """A link at ``entry.path`` under ``root`` to a new file or folder under ``base`` holding what was there (or
    ``SENTINEL``); what was there goes. Returns where the link points."""
    link = root / entry.path
    target = base / f"target_{entry.where}_{entry.path.replace('/', '_')}"
    if entry.points_to == "folder":
        if link.is_dir() and not link.is_symlink():
            link.rename(target)  # what the run held, now outside it
        target.mkdir(parents=True, exist_ok=True)
        (target / "users_file.txt").write_bytes(SENTINEL)
    else:
        target.write_bytes(link.read_bytes() if link.is_file() else SENTINEL)  # the same bytes: a resume reads them
    if link.is_symlink() or link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)
    return target


def contents(path: Path) -> Dict[str, bytes]:
    """Every file under ``path`` (or ``path`` itself) by relative name, with its bytes: a snapshot to compare."""
    if path.is_file():
        return {".": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
