"""Where a run's weights come from, in this order: resume checkpoint, model.pretrained, the network's init."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from torch import nn

from utils.checkpoint.records import ValidationRecord, best_as_of
from utils.checkpoint.snapshot import StateObjects
from utils.checkpoint.state import Checkpoint, Progress
from utils.checkpoint.weights import PRETRAINED_WAY_OUT, MinShare, check_values, load_weights, weight_mismatch
from utils.config import ModelConfig
from utils.distributed.process_group import DistInfo
from utils.errors import CheckpointError

log = logging.getLogger(__name__)


@dataclass
class Restored:
    """What a resume hands the trainer (``Trainer.start_from``): where training continues, the checkpoint it
    continues from, the record of the validation after it (None when that validation did not finish, or
    there was none) and the best checkpoint file at that point."""

    progress: Progress
    path: Path
    record: Optional[ValidationRecord]
    best: Optional[str]


@dataclass
class Resume:
    """A run resumed from ``path``: the checkpoint, the record of the validation after it, and whether its data order still holds."""

    checkpoint: Checkpoint
    path: Path
    record: Optional[ValidationRecord]
    same_data: bool = True
    reset_optimizer: bool = False  # --reset-optimizer: the optimizer state is not restored

    @property
    def progress(self) -> Progress:
        """Where training continues: the checkpoint's position, or its epoch's first batch when the data order no
        longer holds (``same_data`` False: ``--resume-force`` over another data config or world size). The
        schedule's length (``training_length``) and the restored position both start from it."""
        saved = self.checkpoint.progress
        return saved if self.same_data else Progress(saved.epoch, 0, saved.step)

    def restore(self, objects: StateObjects, dist: DistInfo) -> Restored:
        """Everything but the weights (loaded before amp and DDP) into ``objects``, and this rank's random
        state; returns the position and the validation outcome, for the trainer to continue from.

        With ``same_data`` False (``--resume-force`` over a changed data config) the
        interrupted epoch restarts from its first batch.
        """
        checkpoint, progress = self.checkpoint, self.progress
        checkpoint.restore(objects, dist.rank, dist.world_size, self.reset_optimizer)
        if checkpoint.progress.batch != progress.batch:
            log.warning(
                "the data or world size changed (--resume-force): epoch %d restarts from its first batch",
                progress.epoch,
            )
        log.info("training state restored: epoch %d, step %d", progress.epoch, progress.step)
        return Restored(
            progress, self.path, self.record, best_as_of(self.path, self.record, checkpoint.loop_state("checkpointer"))
        )


def load_initial_weights(
    model: nn.Module,
    cfg: ModelConfig,
    resume_path: Optional[Path],
    record: Optional[ValidationRecord],
    check: Callable[[Checkpoint], bool],
    reset_optimizer: bool = False,
) -> Optional[Resume]:
    """Initialise ``model`` (not yet wrapped) and log where its weights came from.

    1. a resume checkpoint: all of its weights (the rest of its state is
       restored by ``Resume.restore`` once the optimizer and the trainer exist);
    2. ``model.pretrained``: a checkpoint of ours or a plain state_dict, with
       ``model.pretrained_prefix``; tensors whose shapes differ (a new head) are
       dropped and keep the network's init, unless ``model.pretrained_strict``;
    3. otherwise the network's own initialisation.

    ``record`` is the resume checkpoint's validation record (``utils/checkpoint/records.py``), read
    by rank 0 for every rank. ``check(checkpoint)`` guards a resume checkpoint before its weights
    are loaded (a CheckpointError refuses it) and says whether its data order still holds.
    """
    if resume_path is not None:
        checkpoint = Checkpoint.load(resume_path)  # a file or a sharded directory
        same_data = check(checkpoint)
        check_values(model.state_dict(), checkpoint.model_weights, str(resume_path))
        try:
            model.load_state_dict(checkpoint.model_weights)
        except RuntimeError as err:
            raise CheckpointError(
                f"cannot resume from '{resume_path}': its weights do not fit network '{cfg.name}' ({weight_mismatch(model, checkpoint.model_weights)}); move it away to start afresh"
            ) from err
        log.info(
            "weights: resumed from %s (epoch %s)%s",
            resume_path,
            checkpoint.progress.epoch,
            "; model.pretrained is not used" if cfg.pretrained else "",
        )
        return Resume(checkpoint, Path(resume_path), record, same_data, reset_optimizer)
    loaded = backbone_file(cfg)
    if cfg.pretrained:
        over = f", over the backbone's pretrained file {loaded}" if loaded else ""
        log.info(
            "weights: model.pretrained=%s (prefix '%s', strict %s%s)",
            cfg.pretrained,
            cfg.pretrained_prefix,
            cfg.pretrained_strict,
            over,
        )
        load_weights(
            model,
            cfg.pretrained,
            cfg.pretrained_prefix,
            cfg.pretrained_strict,
            MinShare(cfg.pretrained_min_share, PRETRAINED_WAY_OUT),
        )
        return None
    if loaded:  # the backbone read its own file while the network was built (its "loaded N tensors" line)
        log.info(
            "weights: the network's initialisation, with the backbone's pretrained file %s loaded by the backbone (no checkpoint to resume, no model.pretrained)",
            loaded,
        )
    else:
        log.info("weights: the network's own initialisation (no checkpoint to resume, no model.pretrained)")
    return None


def backbone_file(cfg: ModelConfig) -> Optional[str]:
    """The file the network's backbone loads itself (``model.args.backbone_args.pretrained``), if any."""
    backbone_args = cfg.args.get("backbone_args") if isinstance(cfg.args, dict) else None
    pretrained = backbone_args.get("pretrained") if isinstance(backbone_args, dict) else None
    return str(pretrained) if isinstance(pretrained, (str, Path)) and pretrained else None


def load_eval_weights(model: nn.Module, path: Path) -> None:
    """Load the weights checkpoint ``path`` evaluated with into the trained ``model`` (wrapped or sharded):
    a sharded checkpoint's shards into the sharded model (a collective), a file's into the unwrapped network."""
    from utils.distributed.fsdp import is_sharded
    from utils.distributed.parallel import unwrap

    checkpoint = Checkpoint.load(path)
    if checkpoint.shards is None or not is_sharded(model):
        check_values(unwrap(model).state_dict(), checkpoint.eval_weights, str(path))
        unwrap(model).load_state_dict(checkpoint.eval_weights)
        return
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    from utils.checkpoint.dcp_safe import load_into

    state = {"model": get_model_state_dict(model)}
    load_into(state, checkpoint.shards)  # dcp.load without running code (restricted .metadata, weights-only entries)
    set_model_state_dict(model, state["model"])
