"""The trackers in the registry loop (``tests/core/test_registered_items.py``): their arguments for a local store
each, what their run must leave, and the run itself in a spawned process (W&B leaves threads behind in a process,
which later forks of it would inherit: the suite's own processes stay free of them)."""

from __future__ import annotations

from pathlib import Path

TRACKERS = ("mlflow", "wandb")  # a tracker's store starts in seconds (MLflow's SQLite schema, W&B's process)


def _mlflow_metrics(out: Path) -> bool:
    from tests.trackers.mlflow_history import histories, run_id

    history = histories(f"sqlite:///{out / 'mlflow.db'}", run_id(out))
    return [step for step, _ in history["train/loss"]] == [1, 2, 3, 4, 5, 6] and "test/top1" in history


def _wandb_steps(out: Path) -> bool:
    from tests.trackers.wandb_files import history

    return [row["_step"] for row in history(out / "trackers") if "train/loss" in row] == [1, 2, 3, 4, 5, 6]


# name -> (constructor kwargs given the run's folder, task, what the run leaves: every step's loss, the test)
TRACKER_EXAMPLES = {
    "mlflow": (
        lambda out: {"tracking_uri": f"sqlite:///{out / 'mlflow.db'}"},
        "classification",
        lambda t, out: _mlflow_metrics(out),
    ),
    "wandb": (lambda out: {"mode": "offline"}, "classification", lambda t, out: _wandb_steps(out)),
}


def run_tracker(name: str, out: Path) -> None:
    """The harness's run with tracker ``name`` (in a spawned process)."""
    from tests.fixtures.harness import run_with
    from utils.registry import HOOKS

    make_kwargs, task, _ = TRACKER_EXAMPLES[name]
    run_with(HOOKS.build(name, **make_kwargs(out)), task, out)
