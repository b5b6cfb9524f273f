"""Where a training run continues: which run folder, from which checkpoint, with which validation record.

Rank 0 decides (``utils/commands/start.py:open_run``) and every rank gets its answer, so all resume
from the same file and the same record:

- ``--resume``: the experiment's newest run that has a checkpoint and did not finish (``utils/run/unfinished.py``:
  it wrote its test row), from its newest usable checkpoint; an empty run folder left by a start that
  failed does not hide the run before it, and a finished run is continued only when named;
- ``--resume RUN_FOLDER``: that run, from its newest usable checkpoint;
- ``--resume FILE``: the newest checkpoint of a run (or ``last.pt``/``best.pt`` when they link to
  it) continues that run; any other checkpoint (an older one, ``best.pt`` of a run that went on,
  a file outside a run folder) starts a new run from it: the file is linked (or copied) into the
  new run's ``checkpoints/`` with its checksum and validation record, so the new run's files, its
  records and its ``best.pt`` never mix with another run's;
- ``train.auto_resume``: like ``--resume``, else the newest run (finished), else a fresh run.

A corrupt newest checkpoint falls back to the one before it (``CheckpointStore.latest_usable``).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional, Union

from utils.checkpoint.records import read_record, record_path, validator_as_of
from utils.checkpoint.sharded import verify_dir
from utils.checkpoint.sharded_layout import is_sharded_checkpoint, looks_sharded
from utils.checkpoint.start_point import Chosen
from utils.checkpoint.state import Checkpoint
from utils.checkpoint.store import CheckpointStore
from utils.checkpoint.stores import open_checkpoint_store
from utils.checkpoint.verified import is_numbered, numbered_file_linked_by
from utils.errors import CheckpointError
from utils.files.owned import copy_in, make_dirs
from utils.run.folder import CHECKPOINTS, CONFIG, LOG, RunFolder, numbered, owning_run, run_holding
from utils.run.unfinished import unfinished_run

Request = Union[bool, str]  # --resume: True (the newest run) or a run folder or checkpoint path; False: no resume


class Continuation(NamedTuple):
    """What a resume request continues: ``run`` (a run folder to continue), or ``start_from`` (a checkpoint file a
    new run starts from), or neither (a fresh run); ``why``: why a bare ``--resume`` chose ``run``, for the start
    line."""

    run: Optional[RunFolder] = None
    start_from: Optional[Path] = None
    why: str = ""


def run_to_continue(experiment: Path, resume: Request, auto_resume: bool) -> Continuation:
    """What the request continues (``Continuation``). Call on rank 0 only."""
    if isinstance(resume, str):
        given = Path(resume).expanduser()
        if looks_sharded(given):
            # half-written: named, before anything is written
            problem = None if is_sharded_checkpoint(given) else verify_dir(given)
            if problem:
                raise CheckpointError(
                    f"--resume {resume}: sharded checkpoint '{given}': {problem}; resume from an earlier checkpoint of the run, or its run folder"
                )
            return Continuation(_continued_by_sharded(given))
        if given.is_file():
            return _continued_by(given)
        if not given.is_dir():
            raise CheckpointError(
                f"--resume {resume}: no such run folder or checkpoint file; give a run folder (e.g. output/<experiment>/run_001), a checkpoint, or --resume alone for the newest run that did not finish"
            )
        return Continuation(_run_folder(given, resume))
    if not (resume or auto_resume):
        return Continuation()
    continued = unfinished_run(experiment, required=bool(resume))
    return Continuation() if continued is None else Continuation(continued.run, None, continued.why)


def _run_folder(given: Path, resume: str) -> RunFolder:
    """The run folder ``--resume DIR`` names; CheckpointError, before anything is written into it (the run's
    lock), when ``DIR`` is not one (``run_holding``)."""
    run = run_holding(given)
    if run is not None and run == given.resolve():
        return RunFolder(given)
    if run is not None:
        hint = f"it lies inside the run folder '{run}': --resume {run}"
    else:
        runs = numbered(given)
        hint = (
            f"it holds runs: --resume {runs[-1].path} continues the newest (or --resume alone)"
            if runs
            else "give a run folder (e.g. output/<experiment>/run_001), a checkpoint, or --resume alone for the newest run that did not finish"
        )
    raise CheckpointError(
        f"--resume {resume}: '{given}' is not a run folder (no {CHECKPOINTS}/, {CONFIG} or {LOG} of a run); {hint}"
    )


def _continued_by(file: Path) -> Continuation:
    """The run a checkpoint file continues (when it is that run's newest), or the file to start a new run from."""
    numbered = numbered_file_linked_by(file) or file
    run = owning_run(numbered)
    if run is not None and is_numbered(numbered.name) and CheckpointStore(run.checkpoints).numbered()[:1] == [numbered]:
        return Continuation(run)
    return Continuation(None, numbered)


def _continued_by_sharded(directory: Path) -> RunFolder:
    """The run a sharded checkpoint directory (or its ``last.dcp``/``best.dcp`` link) continues: only its run's newest."""
    resolved = directory.resolve()
    run = owning_run(resolved)
    if run is not None and open_checkpoint_store(run.checkpoints).numbered()[:1] == [run.checkpoints / resolved.name]:
        return run
    raise CheckpointError(
        f"--resume {directory}: a new run starts only from a checkpoint file; this sharded checkpoint is not its run's newest. "
        "Turn it into one file (python -m utils.checkpoint.convert DIR FILE.pt) and --resume FILE.pt, or --resume its run folder"
    )


def checkpoint_to_resume(run: RunFolder, start_from: Optional[Path], required: bool) -> Optional[Chosen]:
    """The checkpoint ``run`` continues from, read once: ``start_from`` brought into it, or its newest usable one
    (CheckpointError when ``required`` and it has none); with its validation record. Call on rank 0 with the run
    locked."""
    store = open_checkpoint_store(run.checkpoints)  # single files, or sharded directories (dist.mode=fsdp)
    if start_from is not None:
        return adopt(store, start_from)
    found = store.latest_usable()  # its checksum checked
    if found is None:
        if required:
            raise CheckpointError(f"--resume: no checkpoint in '{run.checkpoints}'; train without --resume first")
        return None
    checkpoint = Checkpoint.checked(found, store.read_while_checking(found))
    return Chosen(found, read_record(found), checkpoint)


def adopt(store: CheckpointStore, source: Path) -> Chosen:
    """``source`` as this store's checkpoint of its position (returned as read, named by its link in the store,
    with the validation record read once), with its checksum and validation record, and the file it names as the
    best so far (so the new run's ``best.pt`` is what it was at that point).
    ``source`` is read as every checkpoint is (``Checkpoint.load``: its checksum first): a corrupt file starts nothing."""
    checkpoint = Checkpoint.load(source)
    progress = checkpoint.progress
    name = source.name if is_numbered(source.name) else store.path_for(progress.epoch, progress.batch).name
    record = read_record(source)
    best = validator_as_of(source, record, checkpoint.loop_state).get("file")
    make_dirs(store.directory.parent, store.directory)
    store.link(source, name)
    if record is not None:
        copy_in(store.directory, record_path(source), record_path(store.directory / name), "resume with --resume")
    if best and best != name and (source.parent / best).is_file():
        store.link(source.parent / best, best)
    return Chosen(store.directory / name, record, checkpoint.at(store.directory / name))
