"""What a checkpoint holds: its format, and ``Checkpoint``, the one reader of its entries.

``snapshot.py`` writes them (``snapshot_training_state``, from the run's ``StateObjects`` and ``RunRecord``).

Format 3, a dict saved with ``torch.save``::

    format      3 (an unknown format is refused with a clear error; formats 1 and 2 are upgraded on load)
    framework   the framework version that wrote it
    config      the resolved config of the run (a dict)
    classes     the training data's class list (what the dataset's ``classes`` argument takes), or None;
                test mode labels its split with it (absent from checkpoints of framework 0.2.0 and older)
    data        the training split's identity: {classes, samples, fingerprint} (``utils/data/identity.py``);
                a resume on other data is refused (absent from older checkpoints)
    param_layout  the parameter names of each optimizer group (``utils/checkpoint/optimizer_state.py``):
                a resume moves the optimizer state by name (absent from older checkpoints)
    world_size  the number of processes that trained it
    progress    {epoch, batch, step}: the point training continues from, epoch ``epoch``
                after ``batch`` of its batches, ``step`` optimizer steps in; every rank consumes
                one batch at a time, so ``batch`` counts global batches (with
                ``data.global_batch_size``, the same at every world size)
    model       the network's state_dict (unwrapped: no ``module.`` prefix)
    ema         {weights, updates} of the EMA of the weights, or None
    optimizer, scheduler, amp               their state_dict()s (the samplers need none: their order
                follows from the seed, the epoch and ``progress``)
    rng         the random states of every rank (each rank restores its own; at another
                world size every rank starts new streams from the seed and step)
    loop        the state of the trainer's components, by name: ``nonfinite`` (the skipped-step
                count), ``validator`` (best value and epoch, early-stopping count, the epoch whose
                validation is still ``pending``), ``checkpointer`` (the name of the best file),
                ``accounting`` (the sums behind the logged values: those of the epoch a checkpoint
                cuts, so its metrics count the whole epoch, and those of the steps since the last log
                step, so the next ``train/loss`` is the uninterrupted run's; older checkpoints lack the latter)
    hooks       the state of every hook that keeps one, by hook name

Sharded (``dist.mode=fsdp``, ``utils/checkpoint/sharded.py``): a directory whose DCP shards hold
``model`` and ``optimizer`` (keyed by parameter name, as ``torch.distributed.checkpoint.state_dict``
gives them, so any world size loads them) and whose ``state.pt`` holds every other entry.

What the validation after a checkpoint decided is not in it (the checkpoint is
written first): ``utils/checkpoint/records.py`` keeps it beside the file.

Everything else in the framework asks this module: resume, pretrained
loading, resume guards and test mode never index the dict themselves.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

import torch

from utils import __version__
from utils.checkpoint.formats import FORMAT, upgrade_format_1, upgrade_format_2
from utils.checkpoint.optimizer_state import (
    check_sharded_layout,
    hyperparameters,
    keep_hyperparameters,
    layout_of,
    restore_optimizer,
)
from utils.checkpoint.progress import Progress
from utils.checkpoint.readers import load_file
from utils.checkpoint.rng import reseed_rank, restore_rank_rng
from utils.checkpoint.sharded import (
    load_full,
    load_sharded_optimizer,
    numbered_optimizer_state,
    read_state,
)
from utils.checkpoint.sharded_layout import STATE, looks_sharded
from utils.checkpoint.snapshot import RunRecord, StateObjects, snapshot_training_state
from utils.checkpoint.structure import check_structure
from utils.checkpoint.verified import load_verified
from utils.errors import CheckpointError
from utils.optim.schedules import follow_optimizer, recompute_lr

# the writer's names are importable from here too, beside the reader (tests, code written before snapshot.py)
__all__ = [
    "FORMAT",
    "Checkpoint",
    "Progress",
    "RunRecord",
    "StateObjects",
    "is_training_checkpoint",
    "network_weights_of",
    "snapshot_training_state",
]

log = logging.getLogger(__name__)


def is_training_checkpoint(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` was written by this framework (any format), rather than being a plain state_dict."""
    return "format" in data or ("global_step" in data and isinstance(data.get("model"), Mapping))


class Checkpoint:
    """A checkpoint of this framework, read: the only reader of the format."""

    def __init__(
        self, data: Dict[str, Any], source: Union[str, Path] = "<memory>", shards: Optional[Path] = None
    ) -> None:
        self.source = str(source)
        self.shards = shards  # a sharded checkpoint's directory: model and optimizer are read from it when asked
        if shards is not None:
            data = {**data, "model": {}}
        if not is_training_checkpoint(data):
            raise CheckpointError(
                f"'{self.source}' is not a training checkpoint of this framework (no 'format' entry); a plain state_dict loads as model.pretrained"
            )
        check_structure(data, self.source, sharded=shards is not None)  # one line naming a missing or mistyped entry
        if "format" not in data:
            data = upgrade_format_1(data)
        if data["format"] == 2:
            data = upgrade_format_2(data)
        if data["format"] != FORMAT:
            raise CheckpointError(
                f"checkpoint '{self.source}' has format {data['format']!r}, but framework {__version__} reads format {FORMAT} "
                f"(and upgrades formats 1 and 2); it was written by framework {data.get('framework')}: use that version to read it"
            )
        if not isinstance(data.get("model"), Mapping):
            raise CheckpointError(
                f"checkpoint '{self.source}' has no model weights; it is damaged or not a checkpoint of this framework"
            )
        self._data = {**data, "loop": data.get("loop") or {}, "hooks": data.get("hooks") or {}}

    @classmethod
    def load(cls, path: Union[str, Path]) -> "Checkpoint":
        """Read ``path`` on the CPU after checking its checksum; CheckpointError when it is missing,
        corrupt, unreadable or not ours."""
        if looks_sharded(Path(path)):  # complete or half-written (read_state names what is missing)
            return cls(read_state(Path(path)), path, shards=Path(path))
        return cls(load_verified(Path(path)), path)

    @classmethod
    def checked(cls, path: Union[str, Path], read: Optional[Dict[str, Any]] = None) -> "Checkpoint":
        """``path`` as its store has just checked it (``latest_usable``: a file's checksum, a sharded directory's
        ``SHA256SUMS``), read without hashing it again; ``read``: its contents where checking read them already
        (a file without its checksum: ``read_while_checking``)."""
        path = Path(path)
        if looks_sharded(path):
            return cls(load_file(path / STATE), path, shards=path)
        return cls(read if read is not None else load_file(path), path)

    def at(self, path: Union[str, Path]) -> "Checkpoint":
        """The same checkpoint, read from ``path`` (a link to its file: what its errors then name)."""
        return Checkpoint(self._data, path, self.shards)

    @property
    def config(self) -> Optional[Dict[str, Any]]:
        config = self._data.get("config")
        return config if isinstance(config, dict) else None

    @property
    def classes(self) -> Optional[List[Any]]:
        """The training data's class list (None when the checkpoint has none: older versions, datasets without one)."""
        return self._data.get("classes")

    @property
    def data_identity(self) -> Optional[Dict[str, Any]]:
        """The training split's identity (None in checkpoints of framework 0.3.0 and older)."""
        return self._data.get("data")

    @property
    def param_layout(self) -> Optional[List[List[str]]]:
        """The parameter names of each optimizer group (None in older checkpoints)."""
        return self._data.get("param_layout")

    @property
    def world_size(self) -> Optional[int]:
        return self._data.get("world_size")

    @property
    def framework(self) -> Optional[str]:
        return self._data.get("framework")

    @property
    def progress(self) -> Progress:
        return Progress(**self._data["progress"])

    @property
    def model_weights(self) -> Dict[str, torch.Tensor]:
        """The network's whole weights (a sharded checkpoint's are read, by this process alone, on first use)."""
        if self.shards is not None and not self._data["model"]:
            self._data["model"] = load_full(self.shards, "model")
        return self._data["model"]

    def optimizer_state(self) -> Dict[str, Any]:
        """The optimizer's state_dict as ``torch.optim`` keeps it (parameters numbered in group order),
        also from a sharded checkpoint (whose state is keyed by parameter name)."""
        if self.shards is None:
            return self._data["optimizer"]
        return numbered_optimizer_state(load_full(self.shards, "optimizer"))

    def to_single_file(self) -> Dict[str, Any]:
        """The checkpoint as the dict one ordinary file holds (what ``torch.save`` writes, ``utils/checkpoint/convert.py``)."""
        return {**self._data, "sharded": False, "model": self.model_weights, "optimizer": self.optimizer_state()}

    @property
    def ema_weights(self) -> Optional[Dict[str, torch.Tensor]]:
        ema = self._data.get("ema")
        return ema["weights"] if ema else None

    @property
    def selected_with_ema(self) -> bool:
        """Whether the run monitored (and tested) its EMA weights (``eval.use_ema``)."""
        return bool((self.config or {}).get("eval", {}).get("use_ema")) and self.ema_weights is not None

    @property
    def eval_weights(self) -> Dict[str, torch.Tensor]:
        """The weights the run evaluated with: the EMA's when it selected with them, else the model's."""
        return self.ema_weights if self.selected_with_ema else self.model_weights

    def loop_state(self, name: str) -> Optional[Any]:
        return self._data.get("loop", {}).get(name)

    def restore(
        self, objects: StateObjects, rank: int, world_size: Optional[int] = None, reset_optimizer: bool = False
    ) -> None:
        """Everything but the model's weights (loaded before amp and DDP, see restore.py), and rank ``rank``'s random state
        (new streams from the seed and step when ``world_size`` differs from the checkpoint's).

        The optimizer keeps the groups and hyperparameters this run's config built (a changed
        ``optim.lr`` takes effect) and gets each parameter's saved state by name; ``reset_optimizer``
        leaves that state empty. The schedule continues from the saved step with this run's base LRs."""
        data = self._data
        if reset_optimizer:
            log.warning(
                "--reset-optimizer: the optimizer state of '%s' is not restored; %s starts afresh at step %d",
                self.source,
                type(objects.optimizer).__name__,
                self.progress.step,
            )
        elif self.shards is not None:
            check_sharded_layout(self.param_layout, layout_of(objects.optimizer), self.source)
            own = hyperparameters(objects.optimizer)
            # resharded to this world size; collective
            load_sharded_optimizer(self.shards, objects.model, objects.optimizer)
            keep_hyperparameters(objects.optimizer, own)
        else:
            restore_optimizer(objects.optimizer, data["optimizer"], self.source)
        objects.scheduler.load_state_dict(data["scheduler"])
        follow_optimizer(objects.scheduler)  # the base LRs this run's config gives (optim.lr, param group multipliers)
        recompute_lr(objects.scheduler)  # the schedule of the run's current length, from the resumed step on
        objects.amp.load_state_dict(data["amp"])
        if objects.ema is not None:
            if data.get("ema") is not None:
                objects.ema.load_state_dict(data["ema"])
            else:
                log.warning("the resume checkpoint has no EMA weights; the average starts from the resumed weights")
        for name, obj in objects.loop.items():
            saved = self.loop_state(name)
            if saved:  # an older checkpoint may have none (a 0.1 run saved before its first validation)
                obj.load_state_dict(saved)
        self._restore_hooks(objects.hooks)
        if world_size is not None and self.world_size is not None and world_size != self.world_size:
            if rank == 0:
                log.info(
                    "world size %d -> %d: the random streams (dropout, augmentation) start anew from the seed and step on every rank",
                    self.world_size,
                    world_size,
                )
            reseed_rank(int((self.config or {}).get("seed", 0)), self.progress.step, rank)
        else:
            restore_rank_rng(data.get("rng"), rank)

    def _restore_hooks(self, hooks: Dict[str, Any]) -> None:
        saved: Dict[str, Any] = self._data.get("hooks", {})
        for name, hook in hooks.items():
            if name in saved:
                hook.load_state_dict(saved[name])
            else:
                log.warning(
                    "hook '%s' has no state in the checkpoint (it was not used then, or an older version wrote the checkpoint); it starts fresh",
                    name,
                )
        unused: List[str] = sorted(set(saved) - set(hooks))
        if unused:
            log.warning(
                "the checkpoint holds the state of hook(s) %s that this run does not use; it is ignored",
                ", ".join(unused),
            )


def network_weights_of(data: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    """The network weights in a loaded file: our checkpoint (the weights it evaluated with), a
    ``{"state_dict": ...}`` or ``{"model": ...}`` wrapper, or a plain state_dict."""
    if is_training_checkpoint(data):
        return Checkpoint(data).eval_weights
    for key in ("model", "state_dict"):
        if isinstance(data.get(key), dict):
            return data[key]
    return data
