"""``--mode predict --checkpoint C --input PATH [--output DIR]``: a checkpoint's network on new images.

The network, its precision, the eval transforms, the input normalization and the class
names all come from the checkpoint's saved config (as ``--mode test`` uses them).
Classification writes ``predictions.csv``: one row per image with ``path``,
``prediction`` (the class name), ``score`` (its softmax probability) and the top-k
classes with their probabilities. Salient object detection writes each predicted mask
as ``masks/<image stem>.png`` at its image's own size, and the CSV (``path``, ``mask``,
``mean_saliency``). Under torchrun every rank predicts a disjoint shard of the inputs;
rank 0 writes the rows of all ranks in input order.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch

from utils.checkpoint.state import Checkpoint
from utils.config import Config, save_config
from utils.data import build_eval_loader
from utils.data.batch import to_device
from utils.data.predict_inputs import PredictImages, collect_inputs
from utils.data.transforms import build_transforms
from utils.distributed.ops import all_gather_objects
from utils.distributed.process_group import DistInfo
from utils.engine.test_mode import checkpoint_network
from utils.errors import ConfigError, OutputError
from utils.log import progress
from utils.model.outputs import select
from utils.run_folder import RunFolder

log = logging.getLogger(__name__)

TOPK = 5
TASKS = ("classification", "sod")


def predict_dataset(cfg: Config, paths: List[Path]) -> PredictImages:
    """The inputs read and transformed as the checkpoint's eval split was."""
    channels = cfg.data.args.get("channels", (cfg.model.input_size or [3])[0])
    transform = build_transforms(cfg.data.eval_transforms, "data.eval_transforms")
    image_size = cfg.data.args.get("image_size")
    return PredictImages(paths, channels, transform, image_size, cfg.data.args.get("on_bad_sample", "stop"), cfg.model.input_size or [channels, 1, 1])


def _class_rows(prediction: torch.Tensor, classes: List[str]) -> List[Dict[str, Any]]:
    probs = prediction.detach().float().softmax(dim=1).cpu()
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


@torch.no_grad()
def predict_rows(cfg: Config, info: DistInfo, checkpoint: Checkpoint, dataset: PredictImages, mask_folder: Path) -> List[Tuple[int, Dict[str, Any]]]:
    """``(input index, row)`` for this rank's shard of ``dataset``."""
    model, amp = checkpoint_network(cfg, checkpoint, info.device)
    model.eval()
    loader = build_eval_loader(dataset, cfg.data, info.rank, info.world_size, info.device, cfg.model.channels_last)
    classes = [str(c) for c in checkpoint.classes] if checkpoint.classes else None
    rows: List[Tuple[int, Dict[str, Any]]] = []
    for inputs, targets in progress(loader, len(loader), "predict", info.is_main):
        if inputs.shape[0] == 0:
            continue
        inputs = to_device(inputs, info.device)
        with amp.autocast():
            prediction = select(model(inputs), None, cfg.model.prediction_key)
        indices = targets["index"].tolist()
        if cfg.eval.metric == "sod":
            found = _mask_rows(prediction, targets["size"].cpu(), [dataset.paths[i] for i in indices], mask_folder)
        else:
            found = _class_rows(prediction, classes or [str(i) for i in range(prediction.shape[1])])
        rows.extend((i, {"path": str(dataset.paths[i]), **row}) for i, row in zip(indices, found))
    return rows


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
        raise ConfigError(f"--mode predict knows the tasks {TASKS}; checkpoint '{checkpoint.source}' is of eval.metric={cfg.eval.metric} (video: not yet)")
    dataset = predict_dataset(cfg, collect_inputs(input_spec))
    log.info("predicting %d input(s) with %s from %s", len(dataset), cfg.model.name, checkpoint.source)
    mask_folder = run.path / "masks"
    if info.is_main:
        save_config(cfg, run.config)
    if cfg.eval.metric == "sod":
        mask_folder.mkdir(parents=True, exist_ok=True)
    mine = predict_rows(cfg, info, checkpoint, dataset, mask_folder)
    rows = [row for _, row in sorted((pair for shard in all_gather_objects(mine) for pair in shard), key=lambda pair: pair[0])] if info.world_size > 1 else [row for _, row in mine]
    csv_path = run.path / "predictions.csv"
    if info.is_main:
        write_csv(csv_path, rows)
    return {"inputs": len(dataset), "predicted": len(rows), "csv": str(csv_path)}
