"""How a run starts, before anything is built: what the config alone decides (``plan_start``) and which
folder the run writes into, with the checkpoint it continues from (``open_run``).

``utils/commands/started.py`` calls them in this order, after the config is loaded and its names checked
(``utils/references.py``) and before any data is read: every rule of the config that needs
no data is one error line before a run folder exists, and a start that bad input stops
while its folder is opened takes that folder back (``RunFolder.abandon``, ``latest`` as before).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, FrozenSet, NamedTuple, Optional, Tuple, Union

from utils.amp import AmpPolicy, resolve_policy
from utils.checkpoint.resume_point import checkpoint_to_resume, run_to_continue
from utils.checkpoint.start_point import Chosen
from utils.config.rules import compile_options
from utils.config.schema import Config
from utils.data.dali import check_dali
from utils.data.loader import check_data_folders
from utils.distributed.fsdp import check_fsdp_combination
from utils.distributed.ops import decided_by_rank0
from utils.distributed.process_group import DistInfo
from utils.errors import UserError
from utils.model.compile import check_compile_combination
from utils.references import monitor_mode
from utils.run.folder import RunFolder
from utils.run.folder import create as create_run
from utils.run.folder import named as named_run


class OpenedRun(NamedTuple):
    """What ``open_run`` decided, the one value that carries a resume from the opened run to the trainer: the run's
    folder and the checkpoint it continues from, with its validation record (None: a fresh start), which
    ``start_point`` turns into the run's start; ``why``: why a bare ``--resume`` chose this run (the start line);
    ``adopted``: the checkpoint files linked in to start from (``--resume FILE``), no result of this run."""

    folder: RunFolder
    chosen: Optional[Chosen] = None
    why: str = ""
    adopted: FrozenSet[str] = frozenset()


def open_here(cfg: Config, mode: str, resume: Union[bool, str], output: Optional[str]) -> OpenedRun:
    """Rank 0's part of ``open_run``: the folder (made now, or the run to continue, locked) and the checkpoint.
    A folder made for this start goes again when bad input stops it here (``RunFolder.abandon``)."""
    continued = run_to_continue(cfg.experiment_dir, resume, cfg.train.auto_resume) if mode == "train" else None
    run, start_from = (continued.run, continued.start_from) if continued else (None, None)
    run = run or (
        named_run(Path(output))
        if output
        else create_run(cfg.experiment_dir, *(("run", cfg.experiment.run_tag) if mode == "train" else (mode,)))
    )
    if mode != "train":
        return OpenedRun(run)
    try:
        run.lock()  # before choosing the checkpoint: no other process adds one meanwhile
        chosen = checkpoint_to_resume(run, start_from, required=bool(resume))
    except UserError:
        run.abandon()
        run.release()
        raise
    # linked in to start from: a start stopped later takes the folder back all the same
    adopted = frozenset(entry.name for entry in run.checkpoints.iterdir()) if start_from is not None else frozenset()
    return OpenedRun(run, chosen, continued.why if continued else "", adopted)


def open_run(
    cfg: Config, info: DistInfo, mode: str, resume: Union[bool, str], output: Optional[str] = None
) -> OpenedRun:
    """The run's folder (a new one, or the training run to continue, locked by rank 0), the checkpoint
    to resume and its validation record; rank 0 decides, every rank gets its answer (or its error)."""
    opened: Optional[OpenedRun] = None
    failed: Optional[UserError] = None
    if info.rank == 0:  # rank 0 keeps its own folder object: it holds the lock and knows whether this start made it
        try:
            opened = open_here(cfg, mode, resume, output)
        except UserError as err:
            failed = err

    def answer() -> Tuple[str, Optional[str], Optional[Any]]:  # plain values: what other ranks can receive
        if failed is not None:
            raise failed
        assert opened is not None
        chosen = opened.chosen
        return str(opened.folder.path), None if chosen is None else str(chosen.path), chosen and chosen.record

    path, found, record = decided_by_rank0(answer)  # rank 0's error raised on every rank
    # the other ranks read the chosen checkpoint themselves (start_point)
    return opened or OpenedRun(RunFolder(Path(path)), None if found is None else Chosen(Path(found), record))


class StartPlan(NamedTuple):
    """What the config alone decides, checked before a run folder exists: the precision policy, the
    ``torch.compile`` arguments (None: off) and the direction that makes ``eval.monitor`` better."""

    policy: AmpPolicy
    compiling: Optional[Dict[str, Any]]
    monitor_mode: str


def plan_start(cfg: Config, info: DistInfo, mode: str) -> StartPlan:
    """Every rule of the config that needs no data and no folder, once: a bad combination is one error line
    before anything is written (``--mode train`` with ``dist.mode=fsdp`` casts through the wrapper)."""
    training = mode == "train"
    if mode in ("train", "test"):  # the folders the data writes into (a shard cache): a bad one is bad input too
        check_data_folders(cfg.data)
    policy = resolve_policy(cfg.amp, info.device, training and cfg.dist.mode == "fsdp")
    compiling = compile_options(cfg.train.compile) if training else None
    if training:
        check_compile_combination(compiling, policy.backend, cfg.dist.mode)
        check_fsdp_combination(cfg, policy.backend, policy.loss_scale)
        if cfg.data.loader == "dali":
            check_dali()  # installed: found now rather than after the data and the network
    return StartPlan(
        policy,
        compiling,
        monitor_mode(cfg.eval.metric, cfg.eval.monitor, cfg.eval.monitor_mode, cfg.eval.extra_metrics),
    )
