"""What a registered class's arguments take: types from its annotations, ranges declared beside them.

A network, backbone, dataset, loss or hook says what each argument takes in its
signature, and the config is checked against it before anything is built::

    def __init__(self, num_classes: Count, dropout: Annotated[float, in_range(0, 1, high_open=True)] = 0.0)

Types are read with ``typing.get_type_hints(..., include_extras=True)`` (so
``from __future__ import annotations`` is fine): int, float, bool, str, Optional,
Union, Literal, List/Sequence/Tuple and Dict/Mapping of them; a float must be
finite. Ranges are the markers below inside ``typing.Annotated``. An argument
without an annotation, or annotated with a type outside that vocabulary (a
class, a Callable), is not checked, and neither is a plugin whose annotations
do not resolve: a user's plugin without annotations keeps working as before.
"""

from __future__ import annotations

import logging
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Dict, List, Literal, Sequence, Union

from utils.config.rules import not_finite, takes_floats
from utils.config.typed_merge import type_name, type_ok
from utils.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bound:
    """A range marker: ``test(value)`` must hold for a value already of the annotated type; ``what``
    ends the words of the type (``an integer`` + ``>= 1``)."""

    test: Callable[[Any], bool]
    what: str

    def __call__(self, value: Any) -> bool:
        return bool(self.test(value))


def at_least(low: float) -> Bound:
    """``>= low``."""
    return Bound(lambda v: v >= low, f">= {low:g}")


def above(low: float) -> Bound:
    """``> low``."""
    return Bound(lambda v: v > low, f"> {low:g}")


def in_range(low: float, high: float, low_open: bool = False, high_open: bool = False, what: str = "") -> Bound:
    """``low <= v <= high``, each end open on request: ``in_range(0, 1, low_open=True, high_open=True)`` is (0, 1)."""

    def test(v: Any) -> bool:
        return (v > low if low_open else v >= low) and (v < high if high_open else v <= high)

    return Bound(test, what or f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}")


def non_empty() -> Bound:
    """A list with at least one entry."""
    return Bound(lambda v: len(v) > 0, "with at least one entry")


def length(n: int) -> Bound:
    """A list of exactly ``n`` entries."""
    return Bound(lambda v: len(v) == n, f"with {n} entries")


# the ranges the framework's own plugins use most
Count = Annotated[int, at_least(1)]  # numbers of classes, channels, frames, images; sizes in pixels
Widths = Annotated[Sequence[Count], non_empty()]  # channels per stage
Fraction = Annotated[float, in_range(0, 1, low_open=True, high_open=True)]  # a part of a whole, neither none nor all
# numpy's RandomState takes 32-bit seeds
Seed = Annotated[int, in_range(0, 2**32, high_open=True, what="in [0, 2**32)")]
ImageSize = Union[Count, Annotated[Sequence[Count], length(2)]]  # N (N x N) or [height, width]
Scales = List[Annotated[float, above(0)]]  # factors on an image size
EvalSplits = Annotated[Sequence[Literal["val", "test"]], non_empty()]  # the evaluations a hook draws after


def argument_types(obj: Any) -> Dict[str, Any]:
    """The annotations of ``obj``'s constructor (or of the function ``obj``) with their markers;
    empty when they do not resolve (names only a type checker sees)."""
    target = obj.__init__ if isinstance(obj, type) else obj
    try:
        return typing.get_type_hints(target, include_extras=True)
    except (NameError, TypeError) as err:  # the plugin still works, unchecked
        log.debug("arguments of %r are not checked: its annotations do not resolve (%s)", obj, err)
        return {}


def check_values(what: str, key: str, obj: Any, kwargs: Dict[str, Any]) -> None:
    """ConfigError for the first of ``kwargs`` (the config's ``key``: ``model.args``, ``loss[0]``) whose
    value does not fit the type or the range ``obj`` (``what``: ``network 'classifier'``) declares."""
    types = argument_types(obj)
    for name, value in kwargs.items():
        tp = types.get(name)
        if tp is not None:
            check_value(what, key, name, value, tp)


def check_value(what: str, key: str, name: str, value: Any, tp: Any) -> None:
    """ConfigError when ``value`` (the config's ``key.name``, an argument of ``what``) does not fit the
    type ``tp`` with its range markers, or is a float that is not finite."""
    if not type_ok(value, tp):
        raise ConfigError(
            f"config key '{key}.{name}' must be {type_name(tp)} (an argument of {what}), got {value!r} ({type(value).__name__})"
        )
    if takes_floats(tp) and not_finite(value):  # inf and NaN pass range tests or poison the run silently
        must = "hold finite numbers only" if isinstance(value, (list, tuple)) else "be a finite number"
        raise ConfigError(f"config key '{key}.{name}' must {must} (an argument of {what}), got {value!r}")
