"""The same sweep run again with a changed sweep file: what each change does to its study.

The study records what it was made with (its user attribute ``sweep``); run again, each field follows its rule:

    seeds              seeds added: each finished configuration is queued again and trains them, its objective
                       then the mean over all its seeds; a seed left out is refused (the finished trials'
                       objectives average it)
    space, sampler     refused, old -> new: the finished trials would not compare with the new ones (and a grid's
    eval.monitor       points are numbered by its values); nproc_per_trial changes each run's global batch
    nproc_per_trial
    pruner             takes effect from the next trial (trials pruned before stay pruned)
    trials, parallel   how many and how many at once: free

A study with no trial yet takes any change. A study made before the record keeps the checks it had (the space
of its trials, its direction) and records the sweep from then on.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, List

from utils.errors import ConfigError
from utils.sweep.study import space_distributions

log = logging.getLogger(__name__)

RECORD = "sweep"  # the study's user attribute
REFUSED = ("space", "sampler", "monitor", "nproc_per_trial")
SHOWN = {"monitor": "eval.monitor"}  # a field as the user names it


def made_with(spec: Any, monitor: str) -> Dict[str, Any]:
    """What the study records of the sweep (as its storage keeps it: JSON)."""
    made = {
        "space": {d.key: {d.kind: d.values} for d in spec.space},
        "sampler": spec.sampler,
        "monitor": monitor,
        "nproc_per_trial": spec.nproc_per_trial,
        "seeds": spec.seeds,
        "pruner": spec.pruner,
    }
    return json.loads(json.dumps(made))


def check_changes(study: Any, spec: Any, monitor: str, where: str) -> List[int]:
    """Refuse a change the study cannot take (ConfigError naming the field, old -> new, and the fix); return the
    seeds added since it began. ``spec.seeds`` becomes the study's seeds, in its order, then the added ones."""
    now = made_with(spec, monitor)
    before = study.user_attrs.get(RECORD)
    trials = study.get_trials(deepcopy=False)
    fix = "or run the changed sweep under another experiment.name (a new study and new runs)"
    seeds = before.get("seeds", []) if isinstance(before, dict) else None
    if before is not None and not (isinstance(seeds, list) and all(isinstance(seed, int) for seed in seeds)):
        raise ConfigError(  # a journal is a file others hand over: its record is read only once it is what we write
            f"sweep '{spec.name}': the study in {where} holds a record of its sweep that this framework never writes "
            f"({str(before)[:80]}); restore the journal from a copy, {fix}"
        )
    if before is None and trials:  # a study made before the record: the space its trials tried
        space = space_distributions(spec.space)
        other = next((t for t in trials if t.distributions and t.distributions != space), None)
        if other is not None:
            raise ConfigError(
                f"sweep '{spec.name}': the study in {where} was made for another space ({sorted(other.distributions)} "
                f"as trial {other.number} tried them); put the space back, {fix}"
            )
    if before is None or not trials:
        study.set_user_attr(RECORD, now)
        return []
    for key in REFUSED:
        if before.get(key, now[key]) != now[key]:  # a field the record lacks: unchanged
            raise ConfigError(
                f"sweep '{spec.name}': {SHOWN.get(key, key)} {_shown(before[key])} -> {_shown(now[key])} since its "
                f"study in {where} began, whose finished trials would not compare with new ones; put it back, {fix}"
            )
    seeds, pruner = before.get("seeds", spec.seeds), before.get("pruner", spec.pruner)
    left_out = [seed for seed in seeds if seed not in spec.seeds]
    if left_out:
        raise ConfigError(
            f"sweep '{spec.name}': seeds {seeds} -> {spec.seeds} leaves out {left_out}, which the finished "
            f"trials' objectives average; add seeds only, {fix}"
        )
    added = [seed for seed in spec.seeds if seed not in seeds]
    spec.seeds = seeds + added
    if pruner != spec.pruner:
        log.info("sweep '%s': pruner %s -> %s, from the next trial on", spec.name, pruner, spec.pruner)
    if added or pruner != spec.pruner:
        study.set_user_attr(RECORD, {**now, "seeds": spec.seeds})
    return added


def _shown(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
