"""Hooks: how behaviour is added to the training loop without editing it.

This package is the one home of hooks: the protocol and events (here), the
hook list (``hook_list.py``), the per-task selection (``selection.py``), the
base of picture hooks (``pictures.py``), the two hooks ``main.py`` adds to every
training run (``progress.py``, ``profiler.py``) and the always-on registered one
(``run_summary.py``). It imports no engine code, so plugins may use all of it.

A hook is a class registered in ``HOOKS`` (users put theirs in ``hook/``) with
any of the methods below; subclassing :class:`Hook` is optional and only
documents them. Each method receives the trainer; what a hook may read of it is
:class:`TrainerView`:

- ``trainer.state``: where training is (``epoch``, ``batches_done`` of it (also
  ``batch``), ``step``, ``step_result``, ``loss``, ``train_metrics``); a hook may set ``state.stop``
  to end training after the current epoch;
- ``trainer.parts``: model, optimizer, scheduler, amp, criterion, metric, train
  loader, EMA; ``trainer.dist``: ``rank``, ``world_size``, ``device``,
  ``is_main``; ``trainer.meta``: the resolved ``config`` and the ``classes``;
- ``trainer.writer``: the run's TensorBoard and metrics.jsonl writer
  (``utils.log.RunWriter``: ``image``, ``text``, ``scalars``; a no-op off rank 0);
- ``trainer.evaluate(model, loader, split)`` and ``trainer.hooks.call(event, ...)``;
- ``trainer.read_loss()``: the mean training loss since the previous log step.
  ``state.loss`` is a tensor on the device: reading it makes the host wait for
  the GPU, so a hook reads values at its log steps only (``read_loss`` reads
  once per step however many hooks ask); ``trainer.sync()`` before anything
  that must see every step so far.

Events, in the order of one run (``Trainer.fit`` shows where the built-in
behaviours, which are not hooks, run between them):

===================================  ==============================================
``before_train(trainer)``            once, after a resume restored the state
``before_epoch(trainer)``            the sampler is set to ``state.epoch``
``after_step(trainer)``              after every optimizer step (``state.step`` counts it), after
                                     the step's EMA update and log line, before a periodic checkpoint
``after_epoch(trainer)``             after an epoch's last step, before its checkpoint and validation
``after_eval_batch(trainer, batch)`` during validation and test, on every rank, for each batch
                                     of its slice (an :class:`EvalBatch`)
``after_validation(trainer, metrics)``  after each validation (recorded, logged), with its metrics
``after_train(trainer)``             training ended normally
``after_test(trainer, metrics)``     the test split was evaluated (also ``--mode test``)
===================================  ==============================================

``close()`` runs at the very end, also after an error: release files and threads there.

``after_eval_batch`` sees the outputs the metrics saw, so a hook can draw predictions
without another forward pass. ``batch.split`` is ``val``, ``val_ema`` (the EMA's pass of a
validation) or ``test``. Every rank gets its own slice's batches; a hook that writes
images keeps what it needs on rank 0 (``trainer.dist.is_main``), and one that
reduces over ranks does so in ``after_validation``/``after_test``, which every rank
reaches (also a rank whose slice was empty). TensorBoard events are written at
``trainer.state.step``, the one axis of every event of the run.

Default hooks: a hook class whose ``tasks`` names ``eval.metric`` values (``("sod",)``,
``("classification", "video")``, or ``("*",)`` for every run) is added to every training
and test run of those tasks with its default arguments. A ``hooks:`` entry that names it
sets its arguments instead of adding a second one, and ``enabled: false`` switches it off.
A hook that keeps state defines ``state_dict()`` and ``load_state_dict(state)``;
its state is saved in every checkpoint under its name and restored on ``--resume``.

Order: by ``priority`` (lower first; 50 unless a hook says otherwise), then in the
order the hooks were listed. The progress bar has 15, the profiler 90 (its step
mark spans the other hooks' ``after_step``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Protocol, Tuple

EVENTS = (
    "before_train",
    "before_epoch",
    "after_step",
    "after_epoch",
    "after_eval_batch",
    "after_validation",
    "after_train",
    "after_test",
)


@dataclass
class EvalBatch:
    """One evaluation batch as the metric saw it (tensors on the run's device)."""

    split: str  # val | val_ema | test
    index: int  # the batch's position in this rank's slice, from 0
    inputs: Any
    outputs: Any
    targets: Any
    loader: Any = None  # the loader it came from (``.dataset``, and ``.mean``/``.std`` of its normalization)


class TrainerView(Protocol):
    """What a hook may use of the trainer it is given (``utils/engine/trainer.py`` implements it)."""

    state: Any  # LoopState: epoch, batches_done (also read as batch), step, step_result, loss, train_metrics, stop
    parts: Any  # Parts: model, criterion, amp, optimizer, scheduler, train_loader, metric, ema
    dist: Any  # DistInfo: rank, world_size, device, is_main
    meta: Any  # RunMeta: config, classes
    writer: Any  # RunWriter: scalars, image, text, hparams (no-op off rank 0)
    hooks: Any  # HookList: call(event, ...)
    num_batches: int  # batches per epoch

    def evaluate(self, model: Any, loader: Any, split: str) -> Dict[str, float]: ...

    def read_loss(self) -> float: ...

    def sync(self, agree: bool = False) -> None: ...


class Hook:
    """Base class for hooks: every event is a no-op until overridden."""

    priority: int = 50
    tasks: Tuple[str, ...] = ()  # eval.metric values whose runs get this hook by default ("*": all)

    def before_train(self, trainer: TrainerView) -> None:
        """Once, before the first epoch (after a resume restored the state)."""

    def before_epoch(self, trainer: TrainerView) -> None:
        """At the start of each epoch."""

    def after_step(self, trainer: TrainerView) -> None:
        """After each optimizer step."""

    def after_epoch(self, trainer: TrainerView) -> None:
        """After the last step of each epoch."""

    def after_eval_batch(self, trainer: TrainerView, batch: EvalBatch) -> None:
        """For each batch of this rank's slice during validation and test."""

    def after_validation(self, trainer: TrainerView, metrics: Dict[str, float]) -> None:
        """After each validation, with its metrics."""

    def after_train(self, trainer: TrainerView) -> None:
        """When training ended normally."""

    def after_test(self, trainer: TrainerView, metrics: Dict[str, float]) -> None:
        """After the test split was evaluated."""

    def close(self) -> None:
        """At the very end, also after an error."""
