"""The sweep file: what to vary, over which seeds, how many trials, how to sample and prune, and where the
study lives. Every key and every value is checked here, and every value of the space against the config
schema, before the first trial starts.

    space:                      # dotted config keys
      optim.lr: {log_uniform: [0.001, 0.1]}
      model.args.backbone_args.widths: {choice: [[8, 16], [16, 32]]}
    seeds: [0, 1, 2]            # every configuration once per seed
    trials: 8                   # configurations (default: the grid's size; at most the space's size)
    sampler: tpe                # grid | random | tpe
    pruner: median              # none | median | hyperband
    parallel: 2                 # trials at once on this machine
    nproc_per_trial: 1          # each trial a torchrun job of this many processes
    storage: null               # a journal file in the sweep's folder; or sqlite:///F.db, or a database URL
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import yaml

from utils.config.yaml_load import load_yaml, read_config_text
from utils.errors import ConfigError
from utils.secret_text import hide

KINDS = ("grid", "choice", "uniform", "log_uniform", "int")
SAMPLERS = ("grid", "random", "tpe")
PRUNERS = ("none", "median", "hyperband")
KEYS = ("space", "seeds", "trials", "sampler", "pruner", "parallel", "nproc_per_trial", "storage")
# Keys the sweep sets on every run itself (where its runs go, their names and seeds), each with what to use
# instead: varied in the space, the runs would leave the sweep's folder or a seed would count as a configuration.
OWN_KEYS = {
    "seed": "seeds go in 'seeds', the sweep's list of seeds",
    "experiment.name": "a sweep's runs go into its own experiment: give experiment.name=NAME after the sweep file",
    "experiment.output_root": "give experiment.output_root=DIR after the sweep file",
    "experiment.run_tag": "leave it out: the sweep tags each run with its configuration and seed",
}

log = logging.getLogger(__name__)


@dataclass
class Dimension:
    """One varied key: ``kind`` and its values (grid, choice) or bounds (uniform, log_uniform, int)."""

    key: str
    kind: str
    values: List[Any]

    @property
    def discrete(self) -> bool:
        return self.kind in ("grid", "choice")


@dataclass
class SweepSpec:
    name: str  # the sweep file's stem: the study's name and its folder sweep_<name>
    space: List[Dimension]
    seeds: List[int] = field(default_factory=lambda: [0])
    trials: int = 0
    sampler: str = "grid"
    pruner: str = "none"
    parallel: int = 1
    nproc_per_trial: int = 1
    storage: Optional[str] = None


def load_spec(path: str) -> SweepSpec:
    """The sweep file at ``path``, every key checked (ConfigError naming the file and the key)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--sweep '{path}' is not a file; give the sweep's YAML file (see README: Sweeps)")
    where = f"sweep file '{path}'"
    try:
        data = load_yaml(read_config_text(file))
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    except yaml.YAMLError as err:  # the file, line and column
        raise ConfigError(f"{where} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must hold a mapping with 'space' (and {', '.join(KEYS[1:])})")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; the keys are {list(KEYS)}")
    space = [_dimension(where, key, value) for key, value in _mapping(where, "space", data.get("space")).items()]
    if not space:
        raise ConfigError(
            f"{where}: 'space' is empty; name at least one dotted config key, e.g. optim.lr: {{grid: [0.01, 0.1]}}"
        )
    spec = SweepSpec(file.stem, space)
    spec.seeds = _seeds(where, data.get("seeds", [0]))
    spec.sampler = _choice(where, "sampler", data.get("sampler", "grid"), SAMPLERS)
    spec.pruner = _choice(where, "pruner", data.get("pruner", "none"), PRUNERS)
    spec.parallel = _count(where, "parallel", data.get("parallel", 1))
    spec.nproc_per_trial = _count(where, "nproc_per_trial", data.get("nproc_per_trial", 1))
    spec.storage = hide(data.get("storage"))  # a database password: shown masked (utils/secret_text.py)
    if spec.storage is not None and not isinstance(spec.storage, str):
        raise ConfigError(f"{where}: storage must be null, a file path or a database URL (sqlite:///sweep.db)")
    grid_size = math.prod(len(d.values) for d in space) if all(d.discrete for d in space) else 0
    if spec.sampler == "grid" and not grid_size:
        ranged = [d.key for d in space if not d.discrete]
        raise ConfigError(
            f"{where}: sampler grid needs listed values, but {ranged} are ranges; use grid/choice lists or sampler: tpe"
        )
    trials = data.get("trials", grid_size or None)
    if trials is None:
        raise ConfigError(f"{where}: 'trials' is required with sampler {spec.sampler} (how many configurations to try)")
    spec.trials = _count(where, "trials", trials)
    size = space_size(space)
    if size is not None and spec.trials > size:  # more would train a configuration and its seeds again
        log.info("%s: trials %d, but the space holds %d configurations: %d trials", where, spec.trials, size, size)
        spec.trials = size
    return spec


def space_size(space: List[Dimension]) -> Optional[int]:
    """How many configurations the space holds (listed values, integer ranges); None with a float range."""
    if any(d.kind in ("uniform", "log_uniform") for d in space):
        return None
    return math.prod(len(d.values) if d.discrete else d.values[1] - d.values[0] + 1 for d in space)


def check_space(spec: SweepSpec, build: Callable[[List[str]], Any]) -> None:
    """Build the config with every value (bounds of ranges) of every key: a bad one is one error naming the sweep."""
    for dim in spec.space:
        for value in dim.values:  # every listed value, or both bounds of a range
            try:
                build([override(dim.key, value)])
            except ConfigError as err:
                raise ConfigError(f"sweep '{spec.name}', space {dim.key} value {value!r}: {err}") from None


def override(key: str, value: Any) -> str:
    """``key=value`` as the command line takes it (JSON is YAML)."""
    return f"{key}={json.dumps(value)}"


def _dimension(where: str, key: Any, value: Any) -> Dimension:
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{where}: space key {key!r} must be a dotted config key (seeds go in 'seeds')")
    own = next((k for k in OWN_KEYS if k == key or k.startswith(key + ".")), None)
    if own is not None:
        what = key if own == key else f"{key} (it holds {own})"
        raise ConfigError(f"{where}: space key {what} is set by the sweep itself on every run; {OWN_KEYS[own]}")
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in KINDS:
        raise ConfigError(f"{where}: space {key} must be one of {{{': [...]}, {'.join(KINDS)}: [...]}}, not {value!r}")
    kind, values = next(iter(value.items()))
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: space {key} {kind} takes a non-empty list, not {values!r}")
    bad = _not_finite(values)
    if bad is not None:
        what = "a NaN" if math.isnan(bad) else "an infinity"
        raise ConfigError(
            f"{where}: space {key} {kind} holds {bad}: {what} is not a valid value for {key}; list finite numbers"
        )
    if kind in ("grid", "choice"):
        seen = set()
        for item in values:
            if _identity(item) in seen:  # the same configuration trained (and counted) twice
                raise ConfigError(f"{where}: space {key} lists {item!r} twice; list each value once")
            seen.add(_identity(item))
    if kind in ("uniform", "log_uniform", "int"):
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if len(values) != 2 or not numeric or not values[0] < values[1]:
            raise ConfigError(f"{where}: space {key} {kind} takes [low, high] with low < high, not {values!r}")
        if kind == "log_uniform" and values[0] <= 0:
            raise ConfigError(f"{where}: space {key} log_uniform needs low > 0, not {values[0]}")
        if kind == "int" and not all(isinstance(v, int) for v in values):
            raise ConfigError(f"{where}: space {key} int takes integer bounds, not {values!r}")
    return Dimension(key, kind, values)


def _not_finite(value: Any) -> Optional[float]:
    """The first NaN or infinity anywhere in ``value`` (lists and mappings walked), else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((bad for item in items if (bad := _not_finite(item)) is not None), None)


def _identity(value: Any) -> str:
    """A listed value as the configuration it makes: 1 and 1.0 are one value (a float key reads both as 1.0)."""

    def plain(v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, list):
            return [plain(item) for item in v]
        return {str(k): plain(item) for k, item in v.items()} if isinstance(v, dict) else v

    return json.dumps(plain(value), sort_keys=True)


def _mapping(where: str, name: str, value: Any) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{name}' must be a mapping of dotted config keys, not {value!r}")
    return value


def _seeds(where: str, value: Any) -> List[int]:
    ok = (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**32 for v in value)
    )
    if not ok or len(set(value)) != len(value):
        raise ConfigError(f"{where}: seeds must be a list of distinct integers in [0, 2**32), not {value!r}")
    return list(value)


def _choice(where: str, name: str, value: Any, allowed: tuple) -> str:
    if value not in allowed:
        raise ConfigError(f"{where}: {name} must be one of {list(allowed)}, not {value!r}")
    return value


def _count(where: str, name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where}: {name} must be an integer >= 1, not {value!r}")
    return value
