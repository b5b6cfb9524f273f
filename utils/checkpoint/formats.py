"""Checkpoints of earlier framework versions read in today's format (``utils/checkpoint/state.py`` documents it).

Format 1 (framework 0.1) kept flat keys; format 2 (0.2) kept the validation and checkpoint
state as hooks. Each is upgraded in memory when read; nothing is written back.
"""

from __future__ import annotations

from typing import Any, Dict

FORMAT = 3


def upgrade_format_1(data: Dict[str, Any]) -> Dict[str, Any]:
    """A checkpoint of framework 0.1 (flat keys) in format 2."""
    ema = data.get("ema")
    return {
        "format": 2,
        "framework": data.get("version"),
        "config": data.get("config"),
        "world_size": data.get("world_size"),
        "progress": {
            "epoch": int(data.get("epoch", 0)),
            "batch": int(data.get("batch", 0)),
            "step": int(data.get("global_step", 0)),
        },
        "model": data["model"],
        "ema": None if ema is None else {"weights": ema, "updates": int(data.get("ema_updates", 0))},
        "optimizer": data.get("optimizer"),
        "scheduler": data.get("scheduler"),
        "amp": data.get("amp"),
        "rng": data.get("rng"),
        "loop": {"nonfinite": data.get("nonfinite") or {}},
        "hooks": {"validation": data["best"]} if data.get("best") is not None else {},
    }


def upgrade_format_2(data: Dict[str, Any]) -> Dict[str, Any]:
    """A checkpoint of framework 0.2 in format 3: the states of 0.2's validation and checkpoint hooks become
    the validator's and the checkpointer's (written after the validation: nothing is pending)."""
    hooks = dict(data.get("hooks") or {})
    loop = dict(data.get("loop") or {})
    if "validation" in hooks:
        loop["validator"] = {**hooks.pop("validation"), "pending": None}
    if "checkpoint" in hooks:
        loop["checkpointer"] = hooks.pop("checkpoint")
    for builtin in ("logging", "progress", "preemption", "ema", "profiler"):
        hooks.pop(builtin, None)
    upgraded = {key: value for key, value in data.items() if key != "sampler"}
    return {**upgraded, "format": FORMAT, "loop": loop, "hooks": hooks}
