"""Runs grouped by configuration: the config keys whose values differ between the runs (seed aside) name a
configuration, and runs that agree on all of them are its seeds. One configuration and seed is one sample: of
two complete runs of one seed (trained twice, or an experiment copied beside another) the newest counts and the
other is a repeat, listed and never averaged, so ``n`` is the number of distinct seeds.

Configs are compared as flat dotted keys (``optim.lr``, ``model.args.backbone_args.widths``); a list is one
value (``optim.betas``), and a key one run has and another lacks differs (``-`` where it is missing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

from utils.config.typed_merge import flatten
from utils.run.results import ComparedRun

SEED = "seed"  # what repeats a configuration: never a column, its runs are the configuration's n
# Keys that differ between runs of one configuration without changing what is trained: the folder the runs go
# to and its name (experiment.name, experiment.output_root) and the tag a sweep puts in a run's folder name
# (experiment.run_tag, its configuration and seed). Counted, every run would be a configuration of its own.
BOOKKEEPING = ("experiment.name", "experiment.output_root", "experiment.run_tag")
MISSING = "-"  # shown for a key a run's config does not have


def _same(value: Any) -> str:
    """A value as a comparable text: 0.1 and 0.1 agree, [8, 16] and [8, 16] too, 1 and 1.0 do not (YAML told
    them apart, and so does the config schema)."""
    return json.dumps(value, sort_keys=True, default=str) + type(value).__name__


def shown(value: Any) -> str:
    """A config value as a table cell: a string as it is, anything else as JSON (``null``, ``true``, ``[8, 16]``)."""
    if value is MISSING or isinstance(value, str):
        return str(value)
    return json.dumps(value, default=str)


def varied_keys(configs: Sequence[Dict[str, Any]]) -> List[str]:
    """The keys whose values differ between ``configs`` (flat), in config order; seed and ``BOOKKEEPING`` aside."""
    order: Dict[str, None] = {}
    for config in configs:
        order.update(dict.fromkeys(config))
    varied = []
    for key in order:
        if key == SEED or key in BOOKKEEPING:
            continue
        first = configs[0].get(key, MISSING)
        # equal values of one type agree (the common case, cheap); anything else is compared as text
        if any(not _agree(config.get(key, MISSING), first) for config in configs[1:]):
            varied.append(key)
    return varied


def _agree(value: Any, other: Any) -> bool:
    if type(value) is type(other) and not isinstance(value, (list, dict)):
        return value == other
    return _same(value) == _same(other)


def seed_of(record: ComparedRun) -> str:
    """The run's seed as a comparable text (``_same``): runs of one configuration and one seed are one sample."""
    return _same(record.config.get(SEED, MISSING))


@dataclass
class Configuration:
    """One configuration: its values of the varied keys and its complete runs, one per seed (the newest complete
    run of a seed: its metrics.jsonl written last, the later found on a tie); ``repeats``: the others."""

    values: Dict[str, Any]
    runs: List[ComparedRun] = field(default_factory=list)
    repeats: List[ComparedRun] = field(default_factory=list)
    _seeds: Dict[str, int] = field(default_factory=dict, repr=False)  # seed -> its run's index in runs

    @property
    def n(self) -> int:
        """The number of distinct seeds."""
        return len(self.runs)

    def add(self, record: ComparedRun) -> None:
        """A complete run of this configuration: its seed's sample unless a newer run of that seed is one."""
        index = self._seeds.setdefault(seed_of(record), len(self.runs))
        if index == len(self.runs):
            self.runs.append(record)
        elif self.runs[index].written > record.written:
            self.repeats.append(record)
        else:
            self.repeats.append(self.runs[index])
            self.runs[index] = record

    def label(self) -> str:
        """``optim.lr=0.001, seed...``: the values as one line (``all runs`` when nothing varied)."""
        return ", ".join(f"{key}={shown(value)}" for key, value in self.values.items()) or "all runs"


def group_runs(records: Sequence[ComparedRun]) -> Tuple[List[str], List[Configuration], List[ComparedRun]]:
    """(the varied keys, the configurations in order of their first run, the incomplete runs). A configuration
    holds its complete runs only, one per seed: one whose runs are all incomplete is no configuration, its runs are
    listed."""
    flat = [flatten(record.config) for record in records]
    keys = varied_keys(flat) if flat else []
    configurations: Dict[Tuple[str, ...], Configuration] = {}
    incomplete = []
    for record, config in zip(records, flat):
        if record.test is None:
            incomplete.append(record)
            continue
        values = {key: config.get(key, MISSING) for key in keys}
        identity = tuple(_same(value) for value in values.values())
        configurations.setdefault(identity, Configuration(values)).add(record)
    return keys, list(configurations.values()), incomplete


def values_of(record: ComparedRun, keys: Sequence[str]) -> Dict[str, Any]:
    """A run's values of ``keys`` (an incomplete run's configuration, for its listing)."""
    config = flatten(record.config)
    return {key: config.get(key, MISSING) for key in keys}
