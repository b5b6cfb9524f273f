"""The hooks of one run: a deterministic order, event dispatch, and their state for checkpoints."""

from __future__ import annotations

import itertools
import logging
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from utils.errors import ConfigError
from utils.hook import EVENTS, EvalBatch, Hook
from utils.registry import snake_case

log = logging.getLogger(__name__)


def hook_name(hook: Any) -> str:
    """The name a hook is known by in logs and checkpoints: its ``name`` attribute or its class's."""
    return getattr(hook, "name", None) or snake_case(type(hook).__name__)


def _defines(hook: Any, event: str) -> bool:
    """Whether ``hook`` has its own ``event`` (not only the no-op inherited from ``Hook``)."""
    method = getattr(type(hook), event, None)
    return callable(method) and method is not getattr(Hook, event)


class HookList:
    """Hooks sorted by ``priority`` (lower first; ties keep the given order), called by event name."""

    def __init__(self, hooks: Sequence[Any] = ()) -> None:
        named: List[Tuple[str, Any]] = []
        for hook in hooks:
            if not any(callable(getattr(hook, event, None)) for event in EVENTS):
                raise ConfigError(
                    f"hook '{hook_name(hook)}' ({type(hook).__name__}) defines none of the events {', '.join(EVENTS)}"
                )
            name = hook_name(hook)
            taken = sum(1 for other, _ in named if other == name or other.startswith(name + "#"))
            named.append((f"{name}#{taken + 1}" if taken else name, hook))
        # sorted() is stable: equal priorities keep the order they were listed in
        self._hooks = sorted(named, key=lambda item: getattr(item[1], "priority", 50))

    def __iter__(self) -> Iterator[Any]:
        return (hook for _, hook in self._hooks)

    def __len__(self) -> int:
        return len(self._hooks)

    def names(self) -> List[str]:
        """The hooks' names, in calling order."""
        return [name for name, _ in self._hooks]

    def call(self, event: str, *args: Any) -> None:
        """Call ``event`` on every hook that has it, in order."""
        for _, hook in self._hooks:
            method = getattr(hook, event, None)
            if method is not None:
                method(*args)

    def batch_listener(
        self, trainer: Any, split: str, loader: Any, on_batch: Optional[Callable[[Any, Any, Any], None]] = None
    ) -> Optional[Callable[[Any, Any, Any], None]]:
        """An ``on_batch(inputs, outputs, targets)`` for ``evaluate`` that calls ``on_batch`` and then
        every hook's ``after_eval_batch`` with an :class:`EvalBatch` of ``split``; ``on_batch`` itself
        when no hook listens."""
        listeners = [hook.after_eval_batch for _, hook in self._hooks if _defines(hook, "after_eval_batch")]
        if not listeners:
            return on_batch
        counter = itertools.count()

        def listener(inputs: Any, outputs: Any, targets: Any) -> None:
            if on_batch is not None:
                on_batch(inputs, outputs, targets)
            batch = EvalBatch(split, next(counter), inputs, outputs, targets, loader)
            for after_eval_batch in listeners:
                after_eval_batch(trainer, batch)

        return listener

    def stateful(self) -> Dict[str, Any]:
        """The hooks that keep state (``state_dict`` and ``load_state_dict``), by name."""
        return {
            name: hook
            for name, hook in self._hooks
            if callable(getattr(hook, "state_dict", None)) and callable(getattr(hook, "load_state_dict", None))
        }

    def close(self) -> None:
        """``close()`` on every hook, in reverse order, even when one of them fails."""
        errors = []
        for name, hook in reversed(self._hooks):
            close = getattr(hook, "close", None)
            if close is None:
                continue
            try:
                close()
            except Exception as err:  # the others still release their resources; the first error is raised
                log.error("hook '%s' failed to close: %s", name, err)
                errors.append(err)
        if errors:
            raise errors[0]
