"""Hooks: how behaviour is added to the training loop without editing it.

A hook is a class registered in ``HOOKS`` (users put theirs in ``hook/``) with
any of the methods below; subclassing :class:`Hook` is optional and only
documents them. Each method receives the trainer, whose public attributes are
what a hook reads:

- ``trainer.state``: where training is (``epoch``, ``batch``, ``step``,
  ``step_taken``, ``loss``, ``train_metrics``) and what hooks tell the loop or
  each other (``stop``, ``stop_request``, ``preempted``, ``is_best``, ``last_checkpoint``);
- ``trainer.parts``: model, optimizer, scheduler, amp, criterion, metric,
  loaders, EMA; ``trainer.options``: the loop's settings (``is_main``, ...);
- ``trainer.evaluate(model, loader)`` and ``trainer.hooks.call(event, ...)``;
  ``trainer.hooks.get("logging").writer(trainer)`` is the run's TensorBoard writer
  (``utils.log.RunWriter``: scalars, images, text; a no-op off rank 0).
- ``trainer.read_loss()``: the mean training loss since the previous log step.
  ``state.loss`` is a tensor on the device: reading it makes the host wait for
  the GPU, so a hook reads values at its log steps only (``read_loss`` reads
  once per step however many hooks ask); ``trainer.sync()`` before anything
  that must see every step so far (the checkpoint hook calls it).

Events, in the order of one run:

===================================  ==============================================
``before_train(trainer)``            once, after a resume restored the state
``before_epoch(trainer)``            the sampler is set to ``state.epoch``
``after_step(trainer)``              after every optimizer step (``state.step`` counts it)
``after_epoch(trainer)``             after an epoch's last step: validation, checkpoint
``after_eval_batch(trainer, batch)`` during validation and test, on every rank, for each batch
                                     of its shard (an :class:`EvalBatch`)
``after_validation(trainer, metrics)``  after each validation, with its metrics
``after_train(trainer)``             training ended normally
``after_test(trainer, metrics)``     the test split was evaluated (also ``--mode test``)
===================================  ==============================================

``close()`` runs at the very end, also after an error: release files and threads there.

``after_eval_batch`` sees the outputs the metrics saw, so a hook can draw predictions
without another forward pass. ``batch.split`` is ``val``, ``val_ema`` (the EMA's pass of a
validation) or ``test``. Every rank gets its own shard's batches; a hook that writes
images keeps what it needs on rank 0 (``trainer.options.is_main``), and one that
reduces over ranks does so in ``after_validation``/``after_test``, which every rank
reaches (also a rank whose shard was empty).

Default hooks: a hook class whose ``tasks`` names ``eval.metric`` values (``("sod",)``,
``("classification", "video")``, or ``("*",)`` for every run) is added to every training
and test run of those tasks with its default arguments. A ``hooks:`` entry that names it
sets its arguments instead of adding a second one, and ``enabled: false`` switches it off.
A hook that keeps state defines ``state_dict()`` and ``load_state_dict(state)``;
its state is saved in every checkpoint under its name and restored on ``--resume``.

Order: by ``priority`` (lower first), then in the order the hooks were listed.
The built-in hooks use

========  ============  ==========================================================
priority  hook          what it does
========  ============  ==========================================================
10        logging       log lines, metrics.jsonl and TensorBoard (rank 0)
15        progress      the progress bar (rank 0, on a terminal)
20        ema           updates the EMA of the weights after each step taken
30        preemption    SIGTERM/SIGINT: asks for a checkpoint and a stop
50        (default)     users' hooks
60        validation    evaluates, tracks the best epoch, stops early (patience)
70        checkpoint    saves every N steps, at each epoch's end and on preemption
90        profiler      ``train.profile``: torch.profiler over a few steps (rank 0)
========  ============  ==========================================================

so a user hook sees the step's EMA, and its state is saved by the checkpoint
that follows its ``after_step``/``after_epoch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

EVENTS = ("before_train", "before_epoch", "after_step", "after_epoch", "after_eval_batch", "after_validation", "after_train", "after_test")


@dataclass
class EvalBatch:
    """One evaluation batch as the metric saw it (tensors on the run's device)."""

    split: str  # val | val_ema | test
    index: int  # the batch's position in this rank's shard, from 0
    inputs: Any
    outputs: Any
    targets: Any
    loader: Any = None  # the loader it came from (``.dataset``, and ``.mean``/``.std`` of its normalization)


class Hook:
    """Base class for hooks: every event is a no-op until overridden."""

    priority: int = 50
    tasks: Tuple[str, ...] = ()  # eval.metric values whose runs get this hook by default ("*": all)

    def before_train(self, trainer: Any) -> None:
        """Once, before the first epoch (after a resume restored the state)."""

    def before_epoch(self, trainer: Any) -> None:
        """At the start of each epoch."""

    def after_step(self, trainer: Any) -> None:
        """After each optimizer step."""

    def after_epoch(self, trainer: Any) -> None:
        """After the last step of each epoch."""

    def after_eval_batch(self, trainer: Any, batch: EvalBatch) -> None:
        """For each batch of this rank's shard during validation and test."""

    def after_validation(self, trainer: Any, metrics: Dict[str, float]) -> None:
        """After each validation, with its metrics."""

    def after_train(self, trainer: Any) -> None:
        """When training ended normally."""

    def after_test(self, trainer: Any, metrics: Dict[str, float]) -> None:
        """After the test split was evaluated."""

    def close(self) -> None:
        """At the very end, also after an error."""
