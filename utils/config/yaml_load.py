"""Read YAML as users type it: config files, overrides and plugin arguments all parse here.

PyYAML's safe loader with three changes: numbers in exponent form (``1e-3``) are floats,
as in YAML 1.2; a key given twice in one mapping is a ``ConfigError`` instead of the
second silently winning; ``{key:value}`` without the space after the colon is a
``ConfigError`` that shows the fix. What a document may hold is bounded by
``utils/config/plain_tree.py``. A leaf module (``utils/config/load.py`` and ``utils/config/typed_merge.py``
use it): it imports only the standard library, yaml and other leaves.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Dict, List

import yaml

from utils.config.plain_tree import plain_document
from utils.errors import ConfigError

# A number in exponent form: YAML 1.1 (PyYAML) reads 1e-3 and 5E+2 as strings, it wants 1.0e-3.
EXPONENT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with numbers in exponent form (``1e-3``, ``5E+2``) read as floats, as YAML 1.2 does."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT, list("-+0123456789."))


def _mapping_without_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Dict[Any, Any]:
    """A mapping whose keys are unique: YAML would keep the last of two equal keys without a word
    (a second ``optim:`` block silently replacing the first). A merge key (``<<: *base``) brings keys that those beside it override."""
    lines: Dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        try:
            hash(key)
        except TypeError:  # a list or mapping as a key: construct_mapping names it (a YAMLError, one line)
            continue
        if key in lines:
            raise ConfigError(
                f"key '{key}' appears twice in one mapping (lines {lines[key]} and {line}); YAML would keep only the second: merge them into one"
            )
        lines[key] = line
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)

if getattr(yaml, "__with_libyaml__", False):

    class _FastLoader(yaml.CSafeLoader):
        """``_Loader``'s rules on libyaml's parser: 7x faster on a run's config.yaml (``--mode compare`` reads one per
        run, a thousand in a sweep); files people type keep the pure-Python parser, whose messages the tests pin."""

    _FastLoader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT, list("-+0123456789."))
    _FastLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)
else:  # a PyYAML built without libyaml
    _FastLoader = _Loader

# ``{num_classes:10}``: without a space after the colon, YAML reads one key "num_classes:10" with no value
_GLUED = re.compile(r"^[A-Za-z_][\w.]*:[^\s:]")


def _glued_keys(value: Any) -> List[str]:
    """Keys of ``value``'s mappings (at any depth) that are ``key:value`` written without the space YAML needs."""
    if isinstance(value, dict):
        glued = [k for k, v in value.items() if isinstance(k, str) and v is None and _GLUED.match(k)]
        return glued + [k for v in value.values() for k in _glued_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in _glued_keys(v)]
    return []


def load_yaml(text: str, fast: bool = False) -> Any:
    """Parse YAML as users type it: ``lr: 1e-3`` is the float 0.001, everywhere (config files, overrides,
    plugin arguments). A key given twice in a mapping, and ``{key:value}`` without the space after the
    colon, are ConfigErrors that say so, and so is a document that is no plain tree (``utils/config/plain_tree.py``).
    ``fast``: the same rules on libyaml's parser, for files the framework wrote (a run's config.yaml)."""
    data = plain_document(lambda: yaml.load(text, Loader=_FastLoader if fast else _Loader))
    glued = _glued_keys(data)
    if glued:
        fixed = re.sub(r"(?<=[\w\]}'\"]):(?=[^\s/])", ": ", text.strip())
        raise ConfigError(
            f"'{glued[0]}' reads as one key without a value: YAML needs a space after ':' in a mapping; write {fixed}"
        )
    return data


def read_config_text(path: Path) -> str:
    """The text of the config file ``path``; ConfigError for a folder (naming its YAML files), a missing file
    (naming the closest file beside it) or one that is not UTF-8 text."""
    if path.is_dir():
        found = sorted(str(p) for p in path.glob("*.y*ml"))
        fix = f"give one of its files, e.g. --config {found[0]}" if found else "give a YAML file"
        raise ConfigError(f"config file '{path}' is a folder, not a file; {fix}")
    if not path.is_file():
        try:
            near = difflib.get_close_matches(
                path.name, sorted(p.name for p in path.parent.iterdir() if p.is_file()), n=1, cutoff=0.6
            )
        except OSError:  # no folder to look in (or not readable): no suggestion
            near = []
        fix = f"did you mean '{path.parent / near[0]}'?" if near else "pass an existing YAML file to --config"
        raise ConfigError(f"config file '{path}' does not exist; {fix}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"config file '{path}' is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}: {err.reason}); "
            "save it as UTF-8 (e.g. iconv -f latin1 -t utf-8 old.yaml > new.yaml)"
        ) from None


def read_config_file(path: Path) -> Dict[str, Any]:
    """The mapping of sections in the config file ``path``; ConfigError (naming the file) when it is missing, not
    UTF-8 text, not valid YAML, has a key twice or a mapping without spaces, or holds something else than a mapping."""
    text = read_config_text(path)  # a missing file names the closest one; not UTF-8 is one line
    try:
        data = load_yaml(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file '{path}' is not valid YAML: {err}") from err
    except ConfigError as err:  # a key twice, a mapping without spaces
        raise ConfigError(f"config file '{path}': {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{path}' must hold a mapping of sections, got {type(data).__name__}")
    return data
