"""A run's folder: the one module that knows the output layout, how runs are numbered, and the run's lock.

Every training run gets a folder of its own under its experiment, and so does
every ``--mode test``::

    <experiment.output_root>/<experiment.name>/
      run_001/ run_002/ ...   one per training run; ``--resume`` continues the newest
      latest -> run_002       a pointer to the newest training run
      test_001/ ...           one per --mode test (never written into a training run's records)
      predict_001/ export_001/ ...  one per --mode predict / export (unless --output names a new or empty
                              folder outside every run: ``named``, ``run_holding``)

and inside each of them the files of ``RunFolder`` below. A folder written by
framework 0.2 and older (checkpoints directly under ``<experiment>/``) is a run
folder too: ``--resume`` continues it in place.

One process at a time trains in a run folder: rank 0 holds an exclusive lock on its
``.lock`` for the whole run (``utils/run/lock.py``: a stale lock never blocks a later run).

What is written, renamed or removed under these folders goes through ``utils/files/owned.py``: never through a
link inside them (a run folder is copied and handed over); the output root and ``--output`` may be links.

A start that bad input stops before its folder holds a result leaves no folder behind:
``RunFolder.abandon`` takes back what ``create`` or ``named`` made (and ``latest``).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Collection, List, Optional, Tuple

from utils.errors import ConfigError, OutputError, name_list
from utils.files.owned import check_folder, make_dirs, make_new_folder, remove_folder, remove_tree
from utils.files.writable import name_too_long
from utils.run.latest import LATEST, point_latest, restore_latest
from utils.run.lock import release_lock, take_lock

# the names of a run folder's entries (``RunFolder``'s properties are their paths)
CHECKPOINTS = "checkpoints"
CONFIG = "config.yaml"
LOG = "log.txt"
METRICS = "metrics.jsonl"
SAMPLES = "samples.jsonl"
TB = "tb"
PREDICTIONS = "predictions"
PROFILE = "profile"
TRACKERS = "trackers"
LOCK = ".lock"
# the folders a run keeps inside its folder: a link at one of them is refused before the run writes (``RunFolder.lock``)
FOLDERS = (CHECKPOINTS, TB, TRACKERS, PREDICTIONS, PROFILE)

_NUMBERED = re.compile(r"^(run|test|predict|export|compare)_(\d+)(?:_[A-Za-z0-9.=+_-]+)?$")  # run_012 or run_012_<tag>
# names the layout gives its own folders
RESERVED = f"run_NNN, test_NNN, predict_NNN, export_NNN, compare_NNN, {LATEST}, {CHECKPOINTS}"
# what every start writes before any result: a folder holding nothing else (and no checkpoint) holds nothing of value
BOOKKEEPING = (LOCK, CONFIG, LOG, TB, CHECKPOINTS)

log = logging.getLogger(__name__)


class RunFolder:
    """The named paths of one run's folder, and its lock."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: Optional[int] = None
        self.fresh = False  # this process started the folder (``create``, ``named``): a failed start takes it back
        self._made: List[Path] = []  # the folders this process created for it, deepest first
        self._latest: Optional[Tuple[Path, Optional[str]]] = None  # the experiment's ``latest`` and its target before

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def log(self) -> Path:
        return self.path / LOG

    @property
    def tb(self) -> Path:
        return self.path / TB

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def samples(self) -> Path:
        """Which samples each training step saw (``train.record_samples``)."""
        return self.path / SAMPLES

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def predictions(self) -> Path:
        return self.path / PREDICTIONS

    @property
    def profile(self) -> Path:
        return self.path / PROFILE

    @property
    def lock_file(self) -> Path:
        return self.path / LOCK

    def has_checkpoints(self, besides: Collection[str] = ()) -> bool:
        """Whether it holds a checkpoint (a file, or a sharded directory) besides those named ``besides`` (the files it
        was started from, ``--resume FILE``)."""
        if not self.checkpoints.is_dir():
            return False
        return any(p.name not in besides for pattern in ("*.pt", "*.dcp") for p in self.checkpoints.glob(pattern))

    def holds_results(self, besides: Collection[str] = ()) -> bool:
        """Whether the folder holds anything of value: a checkpoint (besides ``besides``), or anything beyond the
        ``BOOKKEEPING`` of a start (predictions, masks, an exported model, metrics, a profile)."""
        return self.has_checkpoints(besides) or any(entry.name not in BOOKKEEPING for entry in self.path.iterdir())

    def abandon(self, besides: Collection[str] = ()) -> bool:
        """After bad input stopped this process: take back a folder it started (``fresh``) that holds no result
        (``holds_results``; ``besides``: the checkpoints it was started from). The folders it made go (an existing empty ``--output`` is emptied) and the experiment's
        ``latest`` points where it pointed before; returns whether the folder was taken back."""
        if not self.fresh or not self.path.is_dir() or self.holds_results(besides):
            return False
        self.release()
        try:
            for entry in self.path.iterdir():
                remove_tree(self.path, entry)  # a link goes as a link: what it points to stays
            if self._latest is not None:
                restore_latest(*self._latest, self.path.name)
            for folder in self._made:
                if any(folder.iterdir()):  # a parent made for it that something else has written into meanwhile
                    break
                remove_folder(folder.parent, folder)
        except OSError as err:  # the error that stopped the run is the one to report; this is a leftover folder
            log.warning("could not remove '%s', the folder of this failed start (%s)", self.path, err.strerror or err)
            return False
        self.fresh = False
        return True

    # -- one process per run --------------------------------------------------------------------

    def lock(self) -> None:
        """Take the run's lock and write this process's PID and host into it (``utils/run/lock.py``); ConfigError
        when another process holds it, OutputError when the lock cannot be opened (a read-only folder). First a link
        where the run keeps a folder is refused (LinkError): no rotation through a ``checkpoints/`` linked elsewhere."""
        for name in FOLDERS:
            check_folder(self.path, self.path / name)
        self._fd = take_lock(self.lock_file, self.path)

    def release(self) -> None:
        """Let the next process in (the file stays: removing it would race with one taking it)."""
        if self._fd is not None:
            release_lock(self._fd)
            self._fd = None


def numbered(experiment: Path, kind: str = "run") -> List[RunFolder]:
    """The experiment's ``run_NNN`` (or ``test_NNN``) folders, oldest first; a link is none (``--resume PATH`` it)."""
    if not experiment.is_dir():
        return []
    found = [
        (int(m.group(2)), entry)
        for entry in experiment.iterdir()
        if (m := _NUMBERED.match(entry.name)) and m.group(1) == kind and entry.is_dir() and not entry.is_symlink()
    ]
    return [RunFolder(path) for _, path in sorted(found)]


def runs_with_checkpoints(experiment: Path) -> List[RunFolder]:
    """The experiment's training runs that have a checkpoint, newest first (a folder left empty by a start that
    failed is passed over); else a folder of an earlier version that keeps its checkpoints directly under the
    experiment; else none."""
    runs = [run for run in reversed(numbered(experiment)) if run.has_checkpoints()]
    legacy = RunFolder(experiment)
    return runs or ([legacy] if legacy.has_checkpoints() else [])


def create(experiment: Path, kind: str = "run", tag: Optional[str] = None) -> RunFolder:
    """A new, empty ``<kind>_NNN`` folder (``<kind>_NNN_<tag>`` with a tag) numbered after the experiment's
    newest (two runs started at once get two folders); a training run also becomes ``latest``."""
    too_long = name_too_long(experiment)
    if too_long is not None:
        raise ConfigError(
            f"the experiment folder '{experiment}' {too_long}; set experiment.output_root (or experiment.name) shorter"
        )
    link = experiment / LATEST
    if kind == "run" and link.exists() and not link.is_symlink():
        raise OutputError(
            f"'{link}' is a {'folder' if link.is_dir() else 'file'}, where this framework keeps the link to the "
            "experiment's newest run; move it away (rename it) and start again"
        )
    made = [folder for folder in (experiment, *experiment.parents) if not folder.exists()]  # deepest first
    try:
        make_dirs(experiment, experiment)  # the experiment folder: the user's to place (a link included)
        runs = numbered(experiment, kind)
        number = int(_NUMBERED.match(runs[-1].path.name).group(2)) + 1 if runs else 1
        while True:
            path = experiment / (f"{kind}_{number:03d}" + (f"_{tag}" if tag else ""))
            try:
                make_new_folder(experiment, path)
                break
            except FileExistsError:  # another run took this number meanwhile
                number += 1
        run = RunFolder(path)
        run.fresh, run._made = True, [path, *made]
        if kind == "run":
            run._latest = (experiment, os.readlink(link) if link.is_symlink() else None)
            point_latest(experiment, path.name)
    except OSError as err:
        raise OutputError(
            f"cannot create a run folder in '{experiment}' ({err.strerror or err}); set experiment.output_root to a writable folder"
        ) from err
    return run


# what every kind of run writes into its folder
RUN_FILES = (CONFIG, LOG, LOCK, METRICS, CHECKPOINTS)


def is_numbered_run(folder: Path) -> bool:
    """Whether ``folder`` is a ``run_NNN``, ``test_NNN``, ``predict_NNN``, ``export_NNN`` or ``compare_NNN`` folder
    holding a run's files (a run's name alone is not enough)."""
    return _NUMBERED.match(folder.name) is not None and any((folder / name).exists() for name in RUN_FILES)


def run_holding(path: Path) -> Optional[Path]:
    """The run folder that ``path`` is or lies inside, else None: a numbered run folder (``is_numbered_run``), or a
    folder of framework 0.2 and older holding checkpoints. Links are resolved first (``<experiment>/latest/x`` lies
    inside the run ``latest`` points to)."""
    resolved = Path(path).expanduser().resolve()
    for folder in (resolved, *resolved.parents):
        if is_numbered_run(folder) or RunFolder(folder).has_checkpoints():
            return folder
    return None


def place_in_run(path: Path) -> Optional[str]:
    """Where ``path`` lies in the run folder it is or lies inside (``run_holding``), worded to follow its name: ``is a
    run folder``, ``is the run folder 'R'`` (through a link), ``lies inside the run folder 'R'``; None outside every run."""
    if name_too_long(path) is not None:
        return None  # no such folder can exist, let alone hold a run: the writer's own check says why
    run = run_holding(path)
    if run is None:
        return None
    given = Path(path).expanduser()
    if run != given.resolve():
        return f"lies inside the run folder '{run}'"
    return "is a run folder" if run == given.absolute() else f"is the run folder '{run}'"


def named(path: Path) -> RunFolder:
    """The folder ``--output`` names (created when missing): a predict or export run writes there. ConfigError,
    before anything is written, when it is or lies inside a run folder (``run_holding``: a run's records are
    never written by another mode), has or would create a folder of a name the layout keeps (``RESERVED``),
    or exists and is not empty (no earlier output mixes with the new files)."""
    too_long = name_too_long(path)
    if too_long is not None:
        raise ConfigError(f"--output '{path}' {too_long}; give a shorter path")
    where = place_in_run(path)
    if where is not None:
        raise ConfigError(
            f"--output '{path}' {where}; predict and export never write into a run: give a folder outside every run, or leave --output out (a new <experiment>/<mode>_NNN folder)"
        )
    given = Path(path).expanduser()
    made = [folder for folder in (given, *given.parents) if not folder.exists()]  # deepest first
    taken = next(
        (folder for folder in (given, *made) if _NUMBERED.match(folder.name) or folder.name in (LATEST, CHECKPOINTS)),
        None,
    )
    if taken is not None:
        raise ConfigError(
            f"--output '{path}' {'is' if taken == given else 'would create'} a folder named '{taken.name}', a name the run layout keeps "
            f"for its own folders ({RESERVED}), so it would look like a run's; give the folder another name"
        )
    if Path(path).is_dir() and any(Path(path).iterdir()):
        held = name_list(sorted(entry.name for entry in Path(path).iterdir()), show=3)
        raise ConfigError(
            f"--output '{path}' is not empty (it holds {held}); give a new or empty folder, so no earlier output mixes with this one, or leave --output out"
        )
    try:
        make_dirs(path, path)  # --output: the user's to name (a link included)
    except OSError as err:
        raise OutputError(
            f"cannot create the output folder '{path}' ({err.strerror or err}); give --output a writable folder"
        ) from err
    run = RunFolder(Path(path))
    run.fresh, run._made = True, made
    return run


def experiment_of(checkpoint: Path) -> Optional[Path]:
    """The experiment folder of a checkpoint (file or sharded directory) inside a training run,
    ``<experiment>/run_NNN/checkpoints/<checkpoint>`` with links resolved; None for one elsewhere."""
    run = owning_run(Path(checkpoint).expanduser())
    match = _NUMBERED.match(run.path.name) if run is not None else None
    return run.path.parent if match is not None and match.group(1) == "run" else None


def owning_run(checkpoint: Path) -> Optional[RunFolder]:
    """The run folder a checkpoint file belongs to (``<run>/checkpoints/<file>``), or None for a file elsewhere."""
    parent = checkpoint.resolve().parent
    return RunFolder(parent.parent) if parent.name == CHECKPOINTS else None
