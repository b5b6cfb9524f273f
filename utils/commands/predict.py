"""``--mode predict --checkpoint C --input PATH [--output DIR]``: a checkpoint's network on new images.

The network, its precision, the eval transforms, the input normalization and the class
names all come from the checkpoint's saved config (as ``--mode test`` uses them); inputs are
sized as the training dataset sized its eval samples and must reach the network at the size it
was trained at (``utils/data/input_sizing.py``). Classification writes ``predictions.csv``: one row per image
with ``path``, ``prediction`` (the class name), ``score`` (its softmax probability) and the top-k
classes with their probabilities. Salient object detection writes each predicted mask at its
image's own size under ``masks/``, named as the input below ``--input`` with ``.png``
(``utils/data/predict_inputs.py``: ``mask_names``), and the CSV (``path``, ``mask``,
``mean_saliency``). A video network reads folders of frames (``utils/data/predict_videos.py``)
and writes one row per video: the softmax probabilities of its evaluation clips averaged, as
the video metric averages them, and ``clips``. ``--input`` may also name a split packed by ``--mode pack``
(``DIR/<split>`` or ``s3://bucket/prefix/<split>``: ``utils/data/predict_shards.py``). Under torchrun every rank predicts a disjoint
slice of the inputs (of the clips, for videos); rank 0 writes the rows of all ranks in input order.
Every file is written whole or not at all (``output_files.py``), into a folder of its own
(``utils/run/folder.py``: never a run's folder). ``data.args.on_bad_sample`` is predict's own
setting for its input files, whatever the checkpoint's dataset takes (``dataset_check_view``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import logging
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Tuple, Union

import torch

from utils.checkpoint.state import Checkpoint
from utils.commands.checkpoint_network import checkpoint_network
from utils.commands.command_line import Command
from utils.commands.options import (
    ModeParser,
    add_checkpoint,
    add_config,
    add_print_config,
    add_trust_file,
    needs_checkpoint,
)
from utils.commands.output_files import PREDICT_ADVICE, write_config
from utils.commands.started import opened, prepare, print_config, report
from utils.config.schema import Config
from utils.data import build_eval_loader
from utils.data.batch import to_device
from utils.data.input_shape import TASKS
from utils.data.input_sizing import dataset_arg, dataset_parameters, input_sizing
from utils.data.predict_inputs import ImageFiles, PredictImages, collect_inputs, input_root, mask_names
from utils.data.predict_shards import packed_split, shard_source
from utils.data.predict_videos import ClipArgs, FrameFolders, PredictVideos, collect_videos
from utils.data.transforms import build_transforms
from utils.distributed.ops import all_gather_objects
from utils.distributed.process_group import DistInfo
from utils.errors import ConfigError
from utils.files.names import inside
from utils.files.owned import make_dirs, write_atomic
from utils.log import progress
from utils.model.outputs import select
from utils.run.folder import RunFolder
from utils.undecodable import ERRORS

log = logging.getLogger(__name__)

TOPK = 5
CLIP_ARGS = ("clip_len", "frame_stride", "num_clips", "pad_short")


# data.args that predict reads itself (for its inputs), whatever the dataset takes
PREDICT_ARGS = ("on_bad_sample", "cache_limit", "cache_dir")


def dataset_check_view(cfg: Config) -> Config:
    """``cfg`` as the dataset's argument check sees it in predict: without the ``data.args`` that predict reads
    itself (``on_bad_sample``: what an unreadable input does) where the dataset takes no such argument."""
    takes = dataset_parameters(cfg)
    args = {key: value for key, value in cfg.data.args.items() if key in takes or key not in PREDICT_ARGS}
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, args=args))


def input_source(cfg: Config, spec: Optional[str]) -> Any:
    """What ``--input`` names: a packed split (``utils/data/predict_shards.py``), frame folders, or image files."""
    packed = packed_split(spec)
    if packed is not None:
        return shard_source(packed, cfg.eval.metric, dataset_arg(cfg, "cache_limit"), dataset_arg(cfg, "cache_dir"))
    if cfg.eval.metric == "video":
        return FrameFolders(collect_videos(spec))
    return ImageFiles(collect_inputs(spec), input_root(spec))


def predict_dataset(cfg: Config, spec: Optional[str]) -> Union[PredictImages, PredictVideos]:
    """The inputs read, sized and transformed as the checkpoint's eval split was."""
    transform = (
        None if cfg.data.loader == "dali" else build_transforms(cfg.data.eval_transforms, "data.eval_transforms")
    )
    sizing, on_bad_sample = input_sizing(cfg), dataset_arg(cfg, "on_bad_sample") or "stop"
    if sizing.trained_at is None:
        log.warning(
            "the checkpoint's config has no model.input_size: the inputs' size is not checked against the size the network was trained at"
        )
    if cfg.eval.metric == "video":  # cut into clips as the training dataset cut its eval split
        clips = {name: dataset_arg(cfg, name) for name in CLIP_ARGS}
        missing = [name for name, value in clips.items() if value is None]
        if missing:
            raise ConfigError(
                f"--mode predict cuts videos into clips as the training data did, but dataset '{cfg.data.name}' names no {missing}; set data.args.{missing[0]}=..."
            )
        return PredictVideos(input_source(cfg, spec), transform, ClipArgs(**clips), sizing, on_bad_sample)
    decode_for_crop = dataset_arg(cfg, "decode_for_crop") is True  # image_folder's (and its packs') reading
    return PredictImages(input_source(cfg, spec), sizing, transform, on_bad_sample, decode_for_crop)


def _class_rows(probs: torch.Tensor, classes: List[str]) -> List[Dict[str, Any]]:
    """A row per row of ``probs`` (class probabilities): the prediction and the top-k."""
    probs = probs.float().cpu()
    k = min(TOPK, probs.shape[1])
    top = probs.topk(k, dim=1)
    rows = []
    for values, indices in zip(top.values.tolist(), top.indices.tolist()):
        row: Dict[str, Any] = {"prediction": classes[indices[0]], "score": f"{values[0]:.6f}"}
        for rank, (value, index) in enumerate(zip(values, indices), 1):
            row[f"top{rank}_class"], row[f"top{rank}_prob"] = classes[index], f"{value:.6f}"
        rows.append(row)
    return rows


def _save_png(array: Any, path: Path) -> None:
    """``array`` as the PNG ``path`` (its folder the root: the masks' folders are made under a new, empty run folder)."""
    from PIL import Image

    make_dirs(path.parent, path.parent)
    # by format: the temporary file's suffix is not .png
    write_atomic(path.parent, path, lambda fh: Image.fromarray(array).save(fh, format="PNG"), PREDICT_ADVICE)


def _mask_rows(prediction: torch.Tensor, sizes: torch.Tensor, targets: List[Path]) -> List[Dict[str, Any]]:
    """Write each saliency map (at its image's own size) to its ``targets`` file; their CSV columns."""
    from utils.metrics.sod import saliency_maps

    rows = []
    for saliency, target in zip(saliency_maps(prediction, [tuple(s) for s in sizes.tolist()]), targets):
        # saliency bound now
        _save_png(saliency, target)
        rows.append({"mask": str(target), "mean_saliency": f"{saliency.mean() / 255.0:.6f}"})
    return rows


def _mask_paths(run: RunFolder, dataset: PredictImages) -> List[Path]:
    """Each input's mask file under ``<run>/masks``, named after it (a packed sample's key comes from its index)."""
    names = mask_names(dataset.source.keys)
    return [inside(run.path / "masks", str(name), f"input '{path}'") for name, path in zip(names, dataset.paths)]


def _names(checkpoint: Checkpoint, outputs: int) -> List[str]:
    """A name per network output: the class names, then ``output_<i>`` for outputs beyond the data's classes
    (a network may score more classes than its data has; test mode's top-1 takes them into account too)."""
    classes = [str(c) for c in checkpoint.classes or []] or [str(i) for i in range(outputs)]
    return classes + [f"output_{i}" for i in range(len(classes), outputs)]


@torch.no_grad()
def predict_rows(
    cfg: Config, info: DistInfo, checkpoint: Checkpoint, dataset: Union[PredictImages, PredictVideos], masks: List[Path]
) -> List[Tuple[int, Any]]:
    """``(input index, row)`` for this rank's slice of ``dataset`` (a saliency network writes input i's
    mask to ``masks[i]``); for videos ``(video index, clip probabilities)``, one per clip, which
    ``video_rows`` averages once every rank's clips are in."""
    model, amp = checkpoint_network(cfg, checkpoint, info.device)
    model.eval()
    # the torch loader, also for a checkpoint trained through DALI: the dataset sizes the inputs as its pipeline did
    loader = build_eval_loader(
        dataset,
        dataclasses.replace(cfg.data, loader="torch"),
        info.rank,
        info.world_size,
        info.device,
        cfg.model.channels_last,
    )
    rows: List[Tuple[int, Any]] = []
    for inputs, targets in progress(loader, len(loader), "predict", info.is_main):
        if inputs.shape[0] == 0:
            continue
        inputs = to_device(inputs, info.device)
        with amp.autocast():
            prediction = select(model(inputs), None, cfg.model.prediction_key)
        if cfg.eval.metric == "video":  # double, as the video metric sums them
            rows.extend(zip(targets["video"].tolist(), prediction.detach().double().softmax(dim=1).cpu()))
            continue
        indices = targets["index"].tolist()
        if cfg.eval.metric == "sod":
            found = _mask_rows(prediction, targets["size"].cpu(), [masks[i] for i in indices])
        else:
            found = _class_rows(prediction.detach().float().softmax(dim=1), _names(checkpoint, prediction.shape[1]))
        rows.extend((i, {"path": str(dataset.paths[i]), **row}) for i, row in zip(indices, found))
    return rows


def video_rows(
    clips: List[Tuple[int, torch.Tensor]], dataset: PredictVideos, checkpoint: Checkpoint
) -> List[Tuple[int, Dict[str, Any]]]:
    """One row per video: its clips' probabilities averaged (summed in clip order, as the metric does);
    none for a video whose every clip was skipped (``on_bad_sample=skip``)."""
    if not clips:
        return []
    sums = torch.zeros(len(dataset.paths), clips[0][1].numel(), dtype=torch.float64)
    counts = torch.zeros(len(dataset.paths), dtype=torch.float64)
    for video, probs in sorted(clips, key=lambda pair: pair[0]):
        sums[video] += probs
        counts[video] += 1
    found = _class_rows(sums / counts.clamp(min=1).unsqueeze(1), _names(checkpoint, sums.shape[1]))
    return [
        (v, {"path": str(dataset.paths[v]), "clips": int(counts[v]), **row})
        for v, row in enumerate(found)
        if counts[v] > 0
    ]


def _write_rows(out: BinaryIO, rows: List[Dict[str, Any]]) -> None:
    # a file name that is not UTF-8 (``\xff\xfe.png``) is written as the other text is: its bytes as \xNN
    fh = io.TextIOWrapper(out, encoding="utf-8", errors=ERRORS, newline="")
    writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["path"])
    writer.writeheader()
    writer.writerows(rows)
    fh.flush()
    fh.detach()  # ``out`` stays open: write_atomic closes it


def write_csv(path: Path, rows: List[Dict[str, Any]]) -> None:
    """``rows`` as the CSV at ``path``, written whole or not at all (an OutputError with predict's advice)."""
    write_atomic(path.parent, path, lambda out: _write_rows(out, rows), PREDICT_ADVICE)


def predict_checkpoint(
    cfg: Config, info: DistInfo, run: RunFolder, checkpoint: Checkpoint, input_spec: Optional[str]
) -> Dict[str, Any]:
    """Predict every input once over all ranks; rank 0 writes ``<run>/predictions.csv`` in input order."""
    if cfg.eval.metric not in TASKS:
        raise ConfigError(
            f"--mode predict knows the tasks {TASKS}; checkpoint '{checkpoint.source}' is of eval.metric={cfg.eval.metric}"
        )
    dataset = predict_dataset(cfg, input_spec)
    log.info("predicting %d input(s) with %s from %s", len(dataset.paths), cfg.model.name, checkpoint.source)
    _ = dataset[0]  # read (and size-checked) before any file is written: inputs of another size usually all are
    masks = _mask_paths(run, dataset) if cfg.eval.metric == "sod" else []  # each checked before anything is written
    if info.is_main:
        write_config(cfg, run.config, PREDICT_ADVICE)
    mine = predict_rows(cfg, info, checkpoint, dataset, masks)
    pairs = [pair for part in all_gather_objects(mine) for pair in part] if info.world_size > 1 else mine
    if cfg.eval.metric == "video":
        pairs = video_rows(pairs, dataset, checkpoint)
    rows = [row for _, row in sorted(pairs, key=lambda pair: pair[0])]
    csv_path = run.path / "predictions.csv"
    if info.is_main:
        write_csv(csv_path, rows)
    return {"inputs": len(dataset.paths), "predicted": len(rows), "csv": str(csv_path)}


def add_options(parser: ModeParser) -> None:
    add_config(parser)
    add_checkpoint(parser, "predict")
    parser.add_argument(
        "--input",
        help="an image file, a folder of images, a glob, or a packed split (DIR/<split> or s3://bucket/prefix/<split>)",
    )
    parser.add_argument("--output", help="the folder to write (default: output/<experiment>/predict_NNN)")
    add_trust_file(parser)
    add_print_config(parser)


def run(args: argparse.Namespace) -> int:
    if args.print_config:
        return print_config(args, "predict", dataset_check_view)
    start = prepare(args, "predict", dataset_check_view)
    with opened(start, output=args.output) as started:
        report(
            "predict",
            predict_checkpoint(start.cfg, start.info, started.folder, start.checkpoint, args.input),
            start,
            started.folder,
        )
    return 0


COMMAND = Command(
    "--mode predict",
    "predict",
    "run --checkpoint on the --input images (or videos, or a packed split) into predictions.csv",
    add_options,
    run,
    needs_checkpoint,
)
