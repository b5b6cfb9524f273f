"""A checkpoint written: the objects whose state it holds (``StateObjects``), what it records about the run
(``RunRecord``), and the one function that writes its entries (``snapshot_training_state``).

The entries are format 3, as ``state.py`` describes them; ``Checkpoint`` there is their one
reader. The checkpointer (``utils/engine/checkpointer.py``) hands the dict to a store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from torch import nn

from utils import __version__
from utils.checkpoint.formats import FORMAT
from utils.checkpoint.optimizer_state import layout_of
from utils.checkpoint.progress import Progress
from utils.checkpoint.rng import capture_rng
from utils.distributed.ops import all_gather_objects


@dataclass
class StateObjects:
    """The objects whose state a checkpoint holds; each has ``state_dict``/``load_state_dict``."""

    model: nn.Module  # unwrapped (no DDP)
    optimizer: Any
    scheduler: Any
    amp: Any
    ema: Optional[Any] = None
    loop: Dict[str, Any] = field(default_factory=dict)  # the trainer's stateful components, by name
    hooks: Dict[str, Any] = field(default_factory=dict)  # hooks that keep state, by name


def _state_of(obj: Any) -> Any:
    return obj.state_dict() if obj is not None and hasattr(obj, "state_dict") else None


@dataclass
class RunRecord:
    """What a checkpoint records about the run besides the objects' states."""

    config: Dict[str, Any] = field(default_factory=dict)  # the resolved config
    world_size: int = 1
    classes: Optional[List[Any]] = None  # the training data's class list
    data: Optional[Dict[str, Any]] = None  # the training split's identity (utils/data/identity.py)


def snapshot_training_state(
    objects: StateObjects, progress: Progress, run: RunRecord, sharded: bool = False
) -> Dict[str, Any]:
    """The checkpoint of ``progress``: every object's state, the config, class list and data identity, the random states of all ranks.

    A collective (the random states are gathered): every rank calls it. ``sharded``: the model's and
    the optimizer's entries keyed by parameter name, each rank's shards (for a sharded store).
    """
    rng = all_gather_objects(capture_rng())
    if sharded:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

        model, optimizer = (
            get_model_state_dict(objects.model),
            get_optimizer_state_dict(objects.model, objects.optimizer),
        )
    else:
        model, optimizer = objects.model.state_dict(), objects.optimizer.state_dict()
    return {
        "format": FORMAT,
        "framework": __version__,
        "config": run.config,
        "classes": None if run.classes is None else list(run.classes),
        "data": run.data,
        "world_size": run.world_size,
        "progress": dataclasses.asdict(progress),
        "param_layout": layout_of(objects.optimizer),
        "sharded": sharded,
        "model": model,
        "ema": _state_of(objects.ema),
        "optimizer": optimizer,
        "scheduler": objects.scheduler.state_dict(),
        "amp": objects.amp.state_dict(),
        "rng": rng,
        "loop": {name: obj.state_dict() for name, obj in objects.loop.items()},
        "hooks": {name: hook.state_dict() for name, hook in objects.hooks.items()},
    }
