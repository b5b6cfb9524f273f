"""``python main.py --sweep SWEEP.yaml [--config BASE.yaml] [key=value ...]``: the trials of a sweep, ``parallel`` at
once, each configuration's seeds as ordinary runs; the study and the table of trials in
``output/<experiment>/sweep_<name>/``. The same command again continues the sweep: finished trials stay,
a trial a killed sweep left running is queued again and its runs resume from their checkpoints; a changed sweep
file continues or is refused by the rules of ``changes.py``. One (configuration, seed) is one run: a configuration
the sampler draws again is not trained again.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from utils.config.load import load_config
from utils.config.schema import Config
from utils.errors import ConfigError
from utils.files.owned import check_kept, make_dirs
from utils.log import format_number, wall_time
from utils.references import monitor_mode
from utils.sweep.changes import check_changes
from utils.sweep.spec import SweepSpec, check_space, load_spec
from utils.sweep.study import (
    CONFIG_ID,
    SAME_AS,
    claim,
    continue_trials,
    drawn_before,
    open_study,
    optuna_module,
    requeue_dead_trials,
    shown_url,
    space_distributions,
    storage_url,
    used,
    waiting,
)
from utils.sweep.table import write_table
from utils.sweep.trial_runs import TrialContext, TrialFailed, run_configuration
from utils.torchvision_check import check_torchvision

log = logging.getLogger(__name__)


def run_sweep(sweep: str, config: Optional[str], overrides: List[str], build: Callable[[List[str]], Config]) -> int:
    """Run (or continue) the sweep; ``build(extra_overrides)`` makes and checks a trial's config (names included)."""
    spec = load_spec(sweep)
    base = build([])
    check_space(spec, build)
    direction = "maximize" if _mode(base) == "max" else "minimize"
    folder = base.experiment_dir / f"sweep_{spec.name}"
    make_dirs(base.experiment_dir, folder)  # a link at sweep_<name> is refused: its files are written there
    if not spec.storage:  # the study's journal in its folder (Optuna appends to it by name): a link there is refused
        check_kept(folder, folder / "study.journal")
    url = storage_url(spec.storage, folder)
    study = open_study(spec, url, direction)
    monitor = ("ema_" if base.eval.use_ema else "") + base.eval.monitor
    added = check_changes(study, spec, monitor, shown_url(url))
    requeued = requeue_dead_trials(study, url)
    if requeued:
        log.info("trial(s) %s of a sweep process that is gone: queued again, their runs resume", requeued)
    if added:
        continued = continue_trials(study)
        log.info(
            "seed(s) %s added to the sweep: %s; a configuration's objective is the mean over seeds %s",
            added,
            f"the complete trial(s) {continued} are queued again to train them" if continued else "no complete trial",
            spec.seeds,
        )
    args = [*(["--config", config] if config else []), *overrides]
    ctx = TrialContext(
        args,
        base.experiment_dir,
        spec.seeds,
        spec.nproc_per_trial,
        url,
        spec.name,
        monitor,
        direction,
        base.train.epochs,
        spec.pruner,
        dict(os.environ),
        build,
    )
    lock = threading.Lock()
    with ThreadPoolExecutor(spec.parallel) as pool:  # a worker's error is raised here, with its traceback
        for done in [pool.submit(_work, study, spec, ctx, lock, devices, folder) for devices in device_slots(spec)]:
            done.result()
    table = write_table(study, folder, spec, monitor)
    print(table, flush=True)
    return 0


def _work(study: Any, spec: SweepSpec, ctx: TrialContext, lock: threading.Lock, devices: str, folder: Path) -> None:
    optuna = optuna_module()
    while True:
        with lock:
            if not waiting(study) and used(study) >= spec.trials:
                return
            trial = study.ask()
            drawn = CONFIG_ID not in trial.user_attrs  # by the sampler, not queued again by the sweep
            config_id = claim(trial)
            tried = used(study)  # this configuration counted
            params = suggest(trial, spec)
            before = drawn_before(study, trial) if drawn else None
            if before is not None:
                _tell_drawn_again(study, trial, before)
                continue
        began = time.monotonic()
        log.info(
            "trial %d (configuration %d, %d of %d): %s; %d seed(s); %s into the sweep",
            trial.number,
            config_id,
            tried,
            spec.trials,
            params,
            len(spec.seeds),
            wall_time(began - ctx.began),
        )
        try:
            runs, pruned = run_configuration(ctx, trial.number, config_id, params, devices)
        except TrialFailed as err:
            log.error("trial %d failed: %s", trial.number, err)
            with lock:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        values = [r.value for r in runs if r.value is not None]
        with lock:
            trial.set_user_attr("runs", [str(r.folder.name) if r.folder else "" for r in runs])
            if pruned is not None:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            elif values:
                study.tell(trial, statistics.fmean(values))
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            write_table(study, folder, spec, ctx.monitor)
        log.info(
            "trial %d done in %s: %s; %s into the sweep",
            trial.number,
            wall_time(time.monotonic() - began),
            _outcome(ctx.monitor, values, pruned),
            wall_time(time.monotonic() - ctx.began),
        )


def _outcome(monitor: str, values: List[float], pruned: Optional[int]) -> str:
    """What a trial's end line says it came to: pruned, its objective over its seeds, or no value."""
    if pruned is not None:
        return f"pruned ({len(values)} seed(s) trained)"
    if not values:
        return f"no {monitor} recorded: failed"
    return f"{monitor}={format_number(statistics.fmean(values))} (mean of {len(values)} seed(s))"


def _tell_drawn_again(study: Any, trial: Any, before: Any) -> None:
    """A configuration the sampler drew again is not trained again: the trial is failed, naming the earlier one
    (whose runs and value stand; the sampler learns nothing twice)."""
    optuna = optuna_module()
    trial.set_user_attr(SAME_AS, before.number)
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    log.info("trial %d drew the configuration of trial %d again: not trained twice", trial.number, before.number)


def suggest(trial: Any, spec: SweepSpec) -> Dict[str, Any]:
    """The trial's value of every key of the space."""
    optuna = optuna_module()
    params = {}
    for key, dist in space_distributions(spec.space).items():
        if hasattr(dist, "choices"):
            params[key] = json.loads(trial.suggest_categorical(key, dist.choices))
        elif isinstance(dist, optuna.distributions.IntDistribution):
            params[key] = trial.suggest_int(key, dist.low, dist.high)
        else:
            params[key] = trial.suggest_float(key, dist.low, dist.high, log=dist.log)
    return params


def device_slots(spec: SweepSpec) -> List[str]:
    """``CUDA_VISIBLE_DEVICES`` of each parallel worker: ``nproc_per_trial`` GPUs each ("" on a CPU machine)."""
    import torch

    gpus = torch.cuda.device_count()
    if not gpus:
        return [""] * spec.parallel
    need = spec.parallel * spec.nproc_per_trial
    if need > gpus:
        raise ConfigError(
            f"sweep '{spec.name}': parallel {spec.parallel} x nproc_per_trial {spec.nproc_per_trial} needs {need} GPUs, this machine has {gpus}; lower parallel"
        )
    n = spec.nproc_per_trial
    return [",".join(str(g) for g in range(i * n, (i + 1) * n)) for i in range(spec.parallel)]


def _mode(cfg: Config) -> str:
    return monitor_mode(cfg.eval.metric, cfg.eval.monitor, cfg.eval.monitor_mode, cfg.eval.extra_metrics)


def default_build(config: Optional[str], overrides: List[str]) -> Callable[[List[str]], Config]:
    """A trial's config from the base file, the user's overrides and the trial's, every name checked."""
    from utils.references import check_references, import_custom

    check_torchvision()  # the trials' runs would each stop on it

    def build(extra: List[str]) -> Config:
        cfg = load_config(config, [*overrides, *extra])
        import_custom(cfg.custom_imports, [cfg.experiment.output_root])
        check_references(cfg)
        return cfg

    return build
