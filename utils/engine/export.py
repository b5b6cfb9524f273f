"""``--mode export --checkpoint C --format onnx|pt2 [--output DIR]``: a checkpoint's network as a file
other runtimes load, checked against the network before it is kept.

The exported model takes a batch of any size (a dynamic first dimension) of
``model.input_size`` inputs, normalized as the loader normalizes (``data.mean``/``data.std``,
recorded beside it), and returns the prediction (a dict or tuple network: its prediction
entry). It is exported in float32 from the checkpoint's evaluation weights. The exported
file is run on a batch of ``model.input_size`` inputs (another batch size than the one it
was traced with) and compared with the eager network; the largest absolute difference is
printed, and above ``TOLERANCE`` the export is refused and its file removed.
``model.json`` beside it records what a user of the file needs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Dict

import torch
from torch import nn

from utils import __version__
from utils.checkpoint.state import Checkpoint
from utils.config import Config, save_config
from utils.distributed.ops import get_rank
from utils.engine.test_mode import checkpoint_network
from utils.errors import ConfigError, ExportError
from utils.model.outputs import select
from utils.run_folder import RunFolder

log = logging.getLogger(__name__)

TOLERANCE = 1e-4  # the largest absolute difference to the eager network an export may have
INSTALL = 'pip install -e ".[export]"'


class Prediction(nn.Module):
    """The network's prediction only: what an exported file returns."""

    def __init__(self, network: nn.Module, key: str) -> None:
        super().__init__()
        self.network, self.key = network, key

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return select(self.network(x), None, self.key)


def _export_onnx(model: nn.Module, example: torch.Tensor, path: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    try:
        import onnx  # noqa: F401  (torch.onnx needs it)
        import onnxruntime
        import onnxscript  # noqa: F401
    except ImportError as err:
        raise ExportError(f"--format onnx needs onnx, onnxscript and onnxruntime ({err.name} is missing): {INSTALL}") from None
    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.onnx.export(model, (example,), dynamo=True, dynamic_shapes=({0: batch},), input_names=["input"], output_names=["prediction"], verbose=False)
    program.save(str(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda x: torch.from_numpy(session.run(None, {"input": x.numpy()})[0])


def _export_pt2(model: nn.Module, example: torch.Tensor, path: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    batch = torch.export.Dim("batch", min=1, max=4096)
    torch.export.save(torch.export.export(model, (example,), dynamic_shapes=({0: batch},)), str(path))
    loaded = torch.export.load(str(path)).module()
    return lambda x: loaded(x)


EXPORTERS = {"onnx": (_export_onnx, "model.onnx"), "pt2": (_export_pt2, "model.pt2")}


def export_checkpoint(cfg: Config, run: RunFolder, checkpoint: Checkpoint, fmt: str) -> Dict[str, Any]:
    """Export, verify and describe the checkpoint's network in ``run`` (rank 0; other ranks wait for nothing)."""
    if get_rank() != 0:
        return {}
    if not cfg.model.input_size:
        raise ConfigError("--mode export needs model.input_size (one sample's shape, e.g. [3, 224, 224]) in the checkpoint's config or as an override")
    save_config(cfg, run.config)
    network, _ = checkpoint_network(cfg, checkpoint, torch.device("cpu"))
    model = Prediction(network.float(), cfg.model.prediction_key).eval()
    generator = torch.Generator().manual_seed(0)
    example = torch.randn(2, *cfg.model.input_size, generator=generator)
    check = torch.randn(3, *cfg.model.input_size, generator=generator)  # another batch size: the batch is dynamic
    exporter, name = EXPORTERS[fmt]
    path = run.path / name
    with torch.no_grad():
        exported = exporter(model, example, path)
        difference = (exported(check).float() - model(check).float()).abs().max().item()
    log.info("exported %s: largest difference to the network on a batch of %d: %.3g (tolerance %g)", path, len(check), difference, TOLERANCE)
    if not difference <= TOLERANCE:  # NaN is refused too
        path.unlink(missing_ok=True)
        raise ExportError(f"the {fmt} export of '{checkpoint.source}' differs from the network by {difference:.3g} (> {TOLERANCE:g}); it was not kept")
    description = {
        "file": name, "format": fmt, "input": "batch x " + " x ".join(str(n) for n in cfg.model.input_size), "input_size": list(cfg.model.input_size),
        "mean": cfg.data.mean, "std": cfg.data.std, "classes": checkpoint.classes, "task": cfg.eval.metric, "opt_level": cfg.amp.opt_level,
        "exported_dtype": "float32", "framework_version": __version__, "torch_version": torch.__version__, "max_abs_difference": difference,
        "tolerance": TOLERANCE, "checkpoint": str(checkpoint.source),
    }
    (run.path / "model.json").write_text(json.dumps(description, indent=2) + "\n")
    return {"format": fmt, "max_abs_difference": f"{difference:.3g}", "tolerance": f"{TOLERANCE:g}", "file": str(path)}
