"""The sweep's table of trials (``trials.csv``, ``trials.md`` in its folder): state, objective, the varied
values and the run folders, one row per trial; written after every trial and at the end."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Dict, List

from utils.atomic_write import write_text
from utils.sweep.study import CONFIG_ID, REQUEUED

ADVICE = "free space or make the sweep's folder writable"


def trial_rows(study: Any, keys: List[str]) -> List[Dict[str, Any]]:
    rows = []
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        state = trial.state.name.lower() + (" (queued again)" if attrs.get(REQUEUED) else "")
        row = {"trial": trial.number, "configuration": attrs.get(CONFIG_ID, trial.number), "state": state}
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
    write_text(folder / "trials.csv", buffer.getvalue(), ADVICE)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows]
    done = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if done:
        best = study.best_trial
        lines.append(
            f"\nsweep {spec.name}: best {monitor}={best.value:.6g} in trial {best.number} ({_params(best.params)})"
        )
    text = "\n".join(lines) + "\n"
    write_text(folder / "trials.md", text, ADVICE)
    return text


def _shown(value: Any) -> str:
    return value[1:-1] if isinstance(value, str) and value.startswith('"') else str(value)


def _params(params: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={_shown(v)}" for k, v in params.items())
