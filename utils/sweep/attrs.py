"""The attributes a sweep keeps on a study's trials, checked where the study is opened: a study journal is a file
others hand over (a sweep folder copied from a cluster, untarred), and its records carry what the sweep wrote, a
trial's configuration number, host, PID and run folders, as any JSON. ``check_attrs`` refuses, in one line naming
the trial, the attribute, its value and the fix, any value that is not of the type and range the sweep writes, so
the code that uses them (``int(...)``, ``os.kill``, names joined into trials.csv) never meets one."""

from __future__ import annotations

from typing import Any, Callable, Dict

from utils.errors import ConfigError
from utils.files.names import plain_name

INT_MAX = 2**31 - 1  # a configuration, trial or process number the sweep writes stays far below


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT_MAX


def _runs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(n, str) and (n == "" or plain_name(n)) for n in value)


CHECKS: Dict[str, Callable[[Any], bool]] = {
    "config_id": _count,
    "same_as": _count,
    "pid": _count,
    "host": lambda value: isinstance(value, str),
    "requeued": lambda value: isinstance(value, bool),
    "runs": _runs,  # folder names beside the sweep's folder, in its experiment ("" for a run that made none)
}
WRITES = {
    "config_id": "a configuration number",
    "same_as": "a trial number",
    "pid": "a process id",
    "host": "a host name",
    "requeued": "true or false",
    "runs": "a list of run folder names",
}


def check_attrs(study: Any, where: str) -> None:
    """ConfigError for the first trial of ``study`` (read from ``where``) with an attribute the sweep writes that
    holds a value it never writes."""
    for trial in study.get_trials(deepcopy=False):
        for key, value in trial.user_attrs.items():
            if key in CHECKS and not CHECKS[key](value):
                shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
                raise ConfigError(
                    f"the study in {where}: trial {trial.number}'s attribute '{key}' is {shown}, where the sweep "
                    f"writes {WRITES[key]}; the journal was altered or written by something else: restore it from a "
                    "copy, or run the sweep under another experiment.name (a new study)"
                )
