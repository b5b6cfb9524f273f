"""What a mode that reads a checkpoint (test, predict, export) takes from the config the checkpoint saved.

A checkpoint is data: it never imports code and never chooses where the run writes. Its
``custom_imports`` are left out (the user names them again to import them: the warning and
an unknown name's error say how), and so is its ``experiment``: the output goes where the
user's config says, or, for a checkpoint inside a training run, beside that run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from utils.checkpoint.state import Checkpoint
from utils.config.schema import Config
from utils.run.folder import experiment_of


def checkpoint_base(checkpoint: Checkpoint) -> Dict[str, Any]:
    """The config a checkpoint saved, as the base of a mode that reads it, less what a checkpoint never chooses: code to
    import (its ``custom_imports``) and where to write (its ``experiment``). A checkpoint inside a training run
    (``<root>/<experiment>/run_NNN/checkpoints/``) writes beside that run, ``<root>/<experiment>/test_NNN``."""
    base = {
        key: value for key, value in (checkpoint.config or {}).items() if key not in ("custom_imports", "experiment")
    }
    experiment = experiment_of(Path(checkpoint.source))
    if experiment is not None:
        base["experiment"] = {"output_root": str(experiment.parent), "name": experiment.name}
    return base


def not_imported(checkpoint: Optional[Checkpoint], cfg: Config) -> List[str]:
    """The checkpoint's saved ``custom_imports`` that the user did not name again (so none was imported)."""
    saved = (checkpoint.config or {}).get("custom_imports") if checkpoint is not None else None
    return [str(name) for name in saved if name not in cfg.custom_imports] if isinstance(saved, list) else []


def how_to_import(names: List[str], mode: str) -> str:
    """What to say about a checkpoint's ``custom_imports`` that were left out."""
    return (
        f"the checkpoint's config names custom_imports {names}, which --mode {mode} does not import (a checkpoint never imports code); "
        f"if you trust them, import them with custom_imports=[{', '.join(names)}] (an override, or in --config)"
    )
