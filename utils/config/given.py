"""The keys a config sets itself, apart from those it keeps at their defaults: where the data may decide
(``utils/data/shape_from_data.py``), a key the ``--config`` file, the overrides and a checkpoint's config leave out
is the data's, and one they set is the user's, even when its value equals the default."""

from __future__ import annotations

from pathlib import Path
from typing import Any, FrozenSet, List, Mapping, Optional, Sequence, Union

from utils.config.typed_merge import parse_override
from utils.config.yaml_load import read_config_file

# the datasets whose shape the data decides: they read the user's own folders (or packs of them)
FROM_DATA = frozenset({"image_folder", "image_mask_folder", "video_frames_folder"})


def decides(data_name: str) -> bool:
    """Whether the data of ``data.name`` decides the keys the config leaves out."""
    return data_name in FROM_DATA


def _leaves(value: Any, prefix: str) -> List[str]:
    """The dotted keys of the leaves under ``prefix`` of a (nested) mapping; ``prefix`` itself for anything else."""
    if isinstance(value, Mapping) and value:
        return [key for name, sub in value.items() for key in _leaves(sub, f"{prefix}.{name}" if prefix else str(name))]
    return [prefix] if prefix else []


def given_keys(
    path: Optional[Union[str, Path]], overrides: Sequence[str], base: Optional[Mapping[str, Any]] = None
) -> FrozenSet[str]:
    """The dotted keys the config sets itself: every leaf of ``base`` (a checkpoint's config: all of it) and of
    the ``--config`` file, and each override's key (or the leaves of a mapping it gives)."""
    keys: List[str] = _leaves(base or {}, "")
    if path is not None:
        keys += _leaves(read_config_file(Path(path)), "")
    for item in overrides:
        key, value = parse_override(item)
        keys += _leaves(value, key) if isinstance(value, Mapping) and value else [key]
    return frozenset(keys)


def is_given(given: FrozenSet[str], key: str) -> bool:
    """Whether the config sets ``key``: itself, a key below it, or a key above it (``model.args={...}``'s own leaves
    are listed, so a key above it is one whose value is not a mapping, such as ``backbone_args=null``)."""
    parts = key.split(".")
    return any(".".join(parts[:n]) in given for n in range(1, len(parts) + 1)) or any(
        name.startswith(key + ".") for name in given
    )
