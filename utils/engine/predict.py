"""``--mode predict --checkpoint C --input PATH [--output DIR]``: a checkpoint's network on new images.

The network, its precision, the eval transforms, the input normalization and the class
names all come from the checkpoint's saved config (as ``--mode test`` uses them).
Classification writes ``predictions.csv``: one row per image with ``path``,
``prediction`` (the class name), ``score`` (its softmax probability) and the top-k
classes with their probabilities. Salient object detection writes each predicted mask
as ``masks/<image stem>.png`` at its image's own size, and the CSV (``path``, ``mask``,
``mean_saliency``). A video network reads folders of frames (``utils/data/predict_videos.py``)
and writes one row per video: the softmax probabilities of its evaluation clips averaged, as
the video metric averages them, and ``clips``. Under torchrun every rank predicts a disjoint
shard of the inputs (of the clips, for videos); rank 0 writes the rows of all ranks in input order.
"""

from __future__ import annotations

import csv
import inspect
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch

from utils.checkpoint.state import Checkpoint
from utils.config import Config, save_config
from utils.data import build_eval_loader
from utils.data.batch import to_device
from utils.data.predict_inputs import PredictImages, collect_inputs
from utils.data.predict_videos import PredictVideos, collect_videos
from utils.data.transforms import build_transforms
from utils.distributed.ops import all_gather_objects
from utils.distributed.process_group import DistInfo
from utils.engine.test_mode import checkpoint_network
from utils.errors import ConfigError, OutputError
from utils.log import progress
from utils.model.outputs import select
from utils.registry import DATASETS
from utils.run_folder import RunFolder

log = logging.getLogger(__name__)

TOPK = 5
TASKS = ("classification", "sod", "video")
CLIP_ARGS = ("clip_len", "frame_stride", "num_clips", "pad_short")


def dataset_arg(cfg: Config, name: str) -> Any:
    """``data.args.<name>`` as the training dataset saw it: the config's value, else the dataset's own default."""
    if name in cfg.data.args:
        return cfg.data.args[name]
    parameter = inspect.signature(DATASETS.get(cfg.data.name)).parameters.get(name)
    return None if parameter is None else parameter.default


def predict_dataset(cfg: Config, spec: Optional[str]) -> Union[PredictImages, PredictVideos]:
    """The inputs read and transformed as the checkpoint's eval split was."""
    transform = build_transforms(cfg.data.eval_transforms, "data.eval_transforms")
    if cfg.eval.metric == "video":  # cut into clips as the training dataset cut its eval split
        clips = {name: dataset_arg(cfg, name) for name in CLIP_ARGS}
        missing = [name for name, value in clips.items() if value is None]
        if missing:
            raise ConfigError(f"--mode predict cuts videos into clips as the training data did, but dataset '{cfg.data.name}' names no {missing}; set data.args.{missing[0]}=...")
        return PredictVideos(collect_videos(spec), transform, **clips)
    channels = cfg.data.args.get("channels", (cfg.model.input_size or [3])[0])
    image_size = cfg.data.args.get("image_size")
    # the mask datasets resize after the transforms, to data.args.size (utils/data/masks.py: PairPipeline)
    resize_last = dataset_arg(cfg, "size") if cfg.eval.metric == "sod" else None
    return PredictImages(collect_inputs(spec), channels, transform, image_size, cfg.data.args.get("on_bad_sample", "stop"),
                         cfg.model.input_size or [channels, 1, 1], resize_last)


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


def _mask_rows(prediction: torch.Tensor, sizes: torch.Tensor, paths: List[Path], folder: Path) -> List[Dict[str, Any]]:
    from PIL import Image

    from utils.metrics.sod import saliency_maps

    rows = []
    for saliency, path in zip(saliency_maps(prediction, [tuple(s) for s in sizes.tolist()]), paths):
        target = folder / f"{path.stem}.png"
        Image.fromarray(saliency).save(target)
        rows.append({"mask": str(target), "mean_saliency": f"{saliency.mean() / 255.0:.6f}"})
    return rows


def _names(checkpoint: Checkpoint, num_classes: int) -> List[str]:
    return [str(c) for c in checkpoint.classes] if checkpoint.classes else [str(i) for i in range(num_classes)]


@torch.no_grad()
def predict_rows(cfg: Config, info: DistInfo, checkpoint: Checkpoint, dataset: Union[PredictImages, PredictVideos], mask_folder: Path) -> List[Tuple[int, Any]]:
    """``(input index, row)`` for this rank's shard of ``dataset``; for videos ``(video index, clip
    probabilities)``, one per clip, which ``video_rows`` averages once every rank's clips are in."""
    model, amp = checkpoint_network(cfg, checkpoint, info.device)
    model.eval()
    loader = build_eval_loader(dataset, cfg.data, info.rank, info.world_size, info.device, cfg.model.channels_last)
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
            found = _mask_rows(prediction, targets["size"].cpu(), [dataset.paths[i] for i in indices], mask_folder)
        else:
            found = _class_rows(prediction.detach().float().softmax(dim=1), _names(checkpoint, prediction.shape[1]))
        rows.extend((i, {"path": str(dataset.paths[i]), **row}) for i, row in zip(indices, found))
    return rows


def video_rows(clips: List[Tuple[int, torch.Tensor]], dataset: PredictVideos, checkpoint: Checkpoint) -> List[Tuple[int, Dict[str, Any]]]:
    """One row per video: its clips' probabilities averaged (summed in clip order, as the metric does)."""
    if not clips:
        return []
    sums = torch.zeros(len(dataset.paths), clips[0][1].numel(), dtype=torch.float64)
    counts = torch.zeros(len(dataset.paths), dtype=torch.float64)
    for video, probs in sorted(clips, key=lambda pair: pair[0]):
        sums[video] += probs
        counts[video] += 1
    found = _class_rows(sums / counts.clamp(min=1).unsqueeze(1), _names(checkpoint, sums.shape[1]))
    return [(v, {"path": str(dataset.paths[v]), "clips": int(counts[v]), **row}) for v, row in enumerate(found)]


def write_csv(path: Path, rows: List[Dict[str, Any]]) -> None:
    try:
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["path"])
            writer.writeheader()
            writer.writerows(rows)
    except OSError as err:
        raise OutputError.writing(path, err) from err


def predict_checkpoint(cfg: Config, info: DistInfo, run: RunFolder, checkpoint: Checkpoint, input_spec: Optional[str]) -> Dict[str, Any]:
    """Predict every input once over all ranks; rank 0 writes ``<run>/predictions.csv`` in input order."""
    if cfg.eval.metric not in TASKS:
        raise ConfigError(f"--mode predict knows the tasks {TASKS}; checkpoint '{checkpoint.source}' is of eval.metric={cfg.eval.metric}")
    dataset = predict_dataset(cfg, input_spec)
    log.info("predicting %d input(s) with %s from %s", len(dataset.paths), cfg.model.name, checkpoint.source)
    mask_folder = run.path / "masks"
    if info.is_main:
        save_config(cfg, run.config)
    if cfg.eval.metric == "sod":
        mask_folder.mkdir(parents=True, exist_ok=True)
    mine = predict_rows(cfg, info, checkpoint, dataset, mask_folder)
    pairs = [pair for shard in all_gather_objects(mine) for pair in shard] if info.world_size > 1 else mine
    if cfg.eval.metric == "video":
        pairs = video_rows(pairs, dataset, checkpoint)
    rows = [row for _, row in sorted(pairs, key=lambda pair: pair[0])]
    csv_path = run.path / "predictions.csv"
    if info.is_main:
        write_csv(csv_path, rows)
    return {"inputs": len(dataset.paths), "predicted": len(rows), "csv": str(csv_path)}
