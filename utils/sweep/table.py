"""The sweep's table of trials (``trials.csv``, ``trials.md`` in its folder): state, objective, the varied
values and the run folders, one row per trial; written after every trial and at the end."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Dict, List

from utils.files.owned import write_text
from utils.run.results import SWEEP_TABLE
from utils.sweep.study import REQUEUED, SAME_AS, carried_on, configuration

ADVICE = "free space or make the sweep's folder writable"


def trial_rows(study: Any, keys: List[str]) -> List[Dict[str, Any]]:
    rows = []
    trials = study.get_trials(deepcopy=False)
    later = carried_on(trials)
    for trial in trials:
        attrs = trial.user_attrs
        row = {"trial": trial.number, "configuration": configuration(trial), "state": _state(trial, later)}
        row["value"] = "" if trial.value is None else f"{trial.value:.6g}"
        row.update({key: _shown(trial.params.get(key, "")) for key in keys})
        row["runs"] = " ".join(attrs.get("runs", []))
        rows.append(row)
    return rows


def write_table(study: Any, folder: Path, spec: Any, monitor: str) -> str:
    """Write trials.csv and trials.md; return the Markdown table (with the best trial under it)."""
    keys = [d.key for d in spec.space]
    rows = trial_rows(study, keys)
    columns = ["trial", "configuration", "state", f"value ({monitor})", *keys, "runs"]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    writer.writerows([list(r.values()) for r in rows])
    write_text(folder, folder / SWEEP_TABLE, buffer.getvalue(), ADVICE)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows]
    best = best_trial(study)
    if best is not None:  # rounded as a run's best line and test line round (utils/log.py)
        lines.append(
            f"\nsweep {spec.name}: best {monitor}={best.value:.4f} in trial {best.number} ({_params(best.params)})"
        )
    lines.append(f"{'' if best is not None else chr(10)}sweep folder {folder} (trials.md, trials.csv)")
    text = "\n".join(lines) + "\n"
    write_text(folder, folder / "trials.md", text, ADVICE)
    return text


def best_trial(study: Any) -> Any:
    """The best complete trial whose configuration no later trial carries on (that one holds all its seeds)."""
    trials = study.get_trials(deepcopy=False)
    later = carried_on(trials)
    done = [t for t in trials if t.state.name == "COMPLETE" and t.number not in later]
    if not done:
        return None
    pick = max if study.direction.name == "MAXIMIZE" else min
    return pick(done, key=lambda t: t.value)


def _state(trial: Any, later: Dict[int, int]) -> str:
    state, attrs = trial.state.name.lower(), trial.user_attrs
    if attrs.get(REQUEUED):
        return f"{state} (queued again)"
    if SAME_AS in attrs:
        return f"{state} (same as trial {attrs[SAME_AS]})"
    return f"{state} (continued in trial {later[trial.number]})" if trial.number in later else state


def _shown(value: Any) -> str:
    return value[1:-1] if isinstance(value, str) and value.startswith('"') else str(value)


def _params(params: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={_shown(v)}" for k, v in params.items())
