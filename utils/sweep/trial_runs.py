"""One trial: its configuration trained once per seed, each an ordinary run (``main.py``, or a torchrun job of
``nproc_per_trial`` processes) in its own folder ``run_NNN_t<config>_<key>=<value>..._seed=<s>``.

A seed whose run has its test row is done and never trained again; one with a checkpoint resumes exactly
(``--resume <its folder>``); otherwise it starts. The trial's value is the mean over its seeds of the best
validation value of ``eval.monitor``.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from utils.config.schema import RUN_TAG_MAX, Config, to_dict
from utils.errors import ConfigError, name_list
from utils.log import format_number, wall_time
from utils.run.folder import RunFolder, numbered
from utils.run.metrics_file import read_lenient
from utils.run.unfinished import finished
from utils.secret_text import reveal
from utils.sweep import pruning
from utils.sweep.spec import override

ROOT = Path(__file__).resolve().parents[2]  # main.py's folder

log = logging.getLogger(__name__)


@dataclass
class TrialContext:
    """What every trial of the sweep shares: the base command, where runs go, the study and the objective."""

    base_args: List[str]  # --config and the user's overrides
    experiment: Path
    seeds: List[int]
    nproc: int
    storage: str
    study_name: str
    monitor: str
    direction: str  # maximize | minimize
    epochs: int
    pruner: str = "none"
    env: Dict[str, str] = field(default_factory=dict)
    build: Optional[Callable[[List[str]], Config]] = None  # a trial's resolved config from its overrides
    began: float = field(default_factory=time.monotonic)  # when the sweep began: its progress lines' elapsed time


@dataclass
class SeedRun:
    seed: int
    folder: Optional[Path]
    value: Optional[float] = None


def tag(config_id: int, params: Dict[str, Any], seed: int) -> str:
    """``t003_lr=0.01_widths=8-16_seed=1``: the configuration and seed, readable in the folder list, and a valid
    ``experiment.run_tag`` of each (configuration, seed) its own. A tag longer than the run_tag's limit keeps the
    ``key=value`` parts that fit, then a hash of the whole identity: ``t003_lr=0.01_h5f0c2a9e1b_seed=1``."""
    parts = [f"t{config_id:03d}", *(_part(key, value) for key, value in sorted(params.items()))]
    end = f"seed={seed}"
    if len("_".join([*parts, end])) <= RUN_TAG_MAX:
        return "_".join([*parts, end])
    identity = json.dumps([config_id, params, seed], sort_keys=True, default=str)
    end = f"h{hashlib.sha256(identity.encode()).hexdigest()[:10]}_{end}"
    kept = parts[:1]  # t<config> always fits: the parts after it as long as the hash and the seed still do
    for part in parts[1:]:
        if len("_".join([*kept, part, end])) > RUN_TAG_MAX:
            break
        kept.append(part)
    return "_".join([*kept, end])


def _part(key: str, value: Any) -> str:
    """``lr=0.01``: the key's last name and the value, in the characters a run tag takes (no empty ``_`` part)."""
    text = re.sub(r"[^A-Za-z0-9.=+_-]", "-", f"{key.split('.')[-1]}={_plain(value)}")
    return re.sub(r"_+", "_", text).strip("_")


def run_configuration(
    ctx: TrialContext, trial: int, config_id: int, params: Dict[str, Any], devices: str
) -> Tuple[List[SeedRun], Optional[int]]:
    """Train (or resume, or read) every seed's run of trial number ``trial``; (the runs, the epoch offset where the
    pruner stopped, if it did).

    A run that fails raises ``TrialFailed`` with the end of its output."""
    runs = []
    for index, seed in enumerate(ctx.seeds):
        name = tag(config_id, params, seed)
        folder = own_run(find_run(ctx.experiment, name))
        if folder is not None and ctx.build is not None:
            same_configuration(folder, ctx.build([*[override(k, v) for k, v in params.items()], f"seed={seed}"]))
        began, trained = time.monotonic(), folder is None or not finished(RunFolder(folder))
        if trained:
            args = ["--resume", str(folder)] if folder is not None and has_checkpoint(folder) else []
            log.info(
                "trial %d: seed %s %s (%d/%d seeds done)",
                trial,
                seed,
                "resumes" if args else "starts",
                index,
                len(ctx.seeds),
            )
            args += [*ctx.base_args, *[override(k, v) for k, v in params.items()], f"seed={seed}"]
            args.append(f"experiment.run_tag={name}")
            _train(ctx, [*args, *_trial_options(ctx, trial, index * ctx.epochs)], devices)
            folder = find_run(ctx.experiment, name)
        runs.append(SeedRun(seed, folder, best_value(folder, ctx.monitor, ctx.direction)))
        log.info(
            "trial %d: seed %s %s (%d/%d seeds done): best %s=%s; %s into the sweep",
            trial,
            seed,
            f"trained in {wall_time(time.monotonic() - began)}" if trained else "done before",
            index + 1,
            len(ctx.seeds),
            ctx.monitor,
            format_number(runs[-1].value),
            wall_time(time.monotonic() - ctx.began),
        )
        pruned = _pruned_at(ctx, trial)
        if pruned is not None:
            return runs, pruned
    return runs, None


class TrialFailed(Exception):
    """A trial's run ended with an error (its exit status and the end of its output)."""


def _trial_options(ctx: TrialContext, trial: int, step_offset: int) -> List[str]:
    """The options that name the run's trial: it reports its validations to it (a sweep that prunes), and its
    trackers file it under the sweep (``utils/trackers/sweep_parent.py``)."""
    return [
        *("--trial", str(trial), "--trial-study", ctx.study_name, "--trial-storage", reveal(ctx.storage)),
        *("--trial-step-offset", str(step_offset), "--trial-pruner", ctx.pruner),
    ]


def _train(ctx: TrialContext, args: List[str], devices: str) -> None:
    head = [sys.executable, str(ROOT / "main.py")]
    if ctx.nproc > 1:
        head = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ctx.nproc}"]
        head.append(str(ROOT / "main.py"))
    env = dict(ctx.env)
    if devices:
        env["CUDA_VISIBLE_DEVICES"] = devices
    proc = subprocess.run(
        head + args,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=die_with_parent,
    )
    if proc.returncode != 0:
        raise TrialFailed(f"exit {proc.returncode}: {proc.stdout[-2000:]}")


def die_with_parent() -> None:
    """In the trial's process before it starts (Linux): a SIGKILL when the sweep dies, so a killed sweep leaves
    no run training on behind it (the same command again resumes that run; two at once would share its folder)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:  # not Linux: the run outlives a killed sweep, and its folder's lock keeps a second one out
        return
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _pruned_at(ctx: TrialContext, trial: int) -> Optional[int]:
    if ctx.pruner == "none":
        return None
    from utils.sweep.study import open_storage, trial_id

    storage = open_storage(ctx.storage)
    return storage.get_trial(trial_id(storage, ctx.study_name, trial)).user_attrs.get(pruning.PRUNED_AT)


def find_run(experiment: Path, name: str) -> Optional[Path]:
    """The newest ``run_NNN_<name>`` folder of the experiment (by its number, as ``run_folder.numbered`` orders
    the runs: run_1000 after run_999), if any."""
    found = [run.path for run in numbered(experiment) if run.path.name.split("_", 2)[2:] == [name]]
    return found[-1] if found else None


def own_run(folder: Optional[Path]) -> Optional[Path]:
    """``folder``, the run found under a trial's tag, when it holds its config.yaml; else None (a warning names it,
    and the seed trains in a new run). A run's metrics are a trial's result only with the configuration it trained."""
    from utils.run.results import has_own_config

    if folder is None or has_own_config(folder):
        return folder
    log.warning(
        "run '%s' has this trial's tag but no %s (missing, or not a regular file): its metrics are no trial's result; "
        "the seed trains in a new run",
        folder,
        RunFolder(folder).config.name,
    )
    return None


def same_configuration(folder: Path, trial: Config) -> None:
    """ConfigError when the run found under the trial's tag was trained with another configuration (a key that
    changes results, not an inert one): another sweep of the experiment, or this one over another base config,
    whose tag is the same. Counting it for this trial would mix two configurations under one."""
    from utils.checkpoint.guard import setting_changes
    from utils.run.results import read_config

    config = RunFolder(folder).config
    saved = read_config(config) if config.is_file() else {}
    differ = [str(c) for c in setting_changes(saved, to_dict(trial)) if c.rule != "inert"]
    if differ:
        raise ConfigError(
            f"run '{folder}' has this trial's tag but was trained with another configuration ({name_list(differ, show=4)}; "
            "run -> trial): a run counts only for its own configuration and seed; give this sweep another "
            "experiment.name (or move that run away)"
        )


def has_checkpoint(folder: Path) -> bool:
    checkpoints = RunFolder(folder).checkpoints
    return checkpoints.is_dir() and any(checkpoints.iterdir())


def rows(folder: Path) -> List[Dict[str, Any]]:
    """The run's metrics.jsonl rows, read as the run reads them (a line a killed run cut short is skipped: the run
    drops it when the sweep resumes it)."""
    return read_lenient(RunFolder(folder).metrics)


def best_value(folder: Optional[Path], monitor: str, direction: str) -> Optional[float]:
    """The best validation value of ``monitor`` the run recorded (numbers only: NaN and inf included)."""
    values = [
        float(r[monitor])
        for r in (rows(folder) if folder else [])
        if r.get("split") == "val" and isinstance(r.get(monitor), (int, float)) and not isinstance(r[monitor], bool)
    ]
    if not values:
        return None
    return max(values) if direction == "maximize" else min(values)


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "-".join(_plain(v) for v in value)
    return str(value)
