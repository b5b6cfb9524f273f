"""``--mode export --checkpoint C --format onnx|pt2|safetensors [--output DIR]``: a checkpoint's network as a
file other runtimes load, checked against the network before it is kept.

The exported model takes a batch of any size (a dynamic first dimension) of
``model.input_size`` inputs, normalized as the loader normalizes (``data.mean``/``data.std``,
recorded beside it), and returns the prediction (a dict or tuple network: its prediction
entry). It is exported in float32 from the checkpoint's evaluation weights, built afresh: a
network trained at O2/O3 (bf16, fp16), with ``train.ema`` or ``model.channels_last``, exports
as float32 in contiguous memory, without amp's casting. ``safetensors`` writes those weights as
a float32 state dict (load it into the network the config builds). The exported file is run
on a batch of ``model.input_size`` inputs (another batch size than the one it was traced
with) and compared with the eager network; the largest absolute difference is printed, and
above ``TOLERANCE`` the export is refused and nothing is kept. Files are written in a hidden
staging folder and moved into the output folder once verified (``output_files.py``: a full
disk leaves no partial file). ``model.json`` beside it records what a user of the file needs.
The exporters' own progress logs (onnxscript's passes) are kept out of the run's log; their
warnings and errors are not.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import logging
import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterator

import torch
from torch import nn

from utils import __version__
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
from utils.commands.output_files import EXPORT_ADVICE, write_config, write_json
from utils.commands.started import opened, prepare, print_config, report
from utils.config.schema import AmpConfig, Config
from utils.distributed.ops import get_rank
from utils.errors import ConfigError, ExportError, OutputError
from utils.files.owned import make_new_folder, open_file, remove_tree, replace
from utils.model.build import build_network
from utils.model.outputs import select
from utils.run.folder import RunFolder

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


Runner = Callable[[torch.Tensor], torch.Tensor]
STAGING = ".export-"  # the hidden folder, inside the output folder, where a file is written and verified before it is moved out
# INFO lines about their own passes
CHATTY_LOGGERS = (
    "onnxscript",
    "onnx_ir",
    "torch.onnx",
    "torch.export",
    "torch._export",
)


@contextlib.contextmanager
def quiet_exporters() -> Iterator[None]:
    """The exporters' INFO progress lines (onnxscript's graph passes) kept out of the run's log and console;
    their warnings and errors still show, and exceptions propagate."""
    loggers = [logging.getLogger(name) for name in CHATTY_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A failed write of ``path`` (a full disk, no permission) as one OutputError naming the file's final name."""
    try:
        yield
    except OSError as err:
        staged = path.parent.name.startswith(STAGING)
        raise OutputError.writing(path.parent.parent / path.name if staged else path, err, EXPORT_ADVICE) from err


def _export_onnx(model: nn.Module, example: torch.Tensor, path: Path, cfg: Config) -> Runner:
    try:
        import onnx  # noqa: F401  (torch.onnx needs it)
        import onnxruntime
        import onnxscript  # noqa: F401
    except ImportError as err:
        raise ExportError(
            f"--format onnx needs onnx, onnxscript and onnxruntime ({err.name} is missing): {INSTALL}"
        ) from None
    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.onnx.export(
        model,
        (example,),
        dynamo=True,
        dynamic_shapes=({0: batch},),
        input_names=["input"],
        output_names=["prediction"],
        verbose=False,
    )
    with _writing(path):
        program.save(str(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda x: torch.from_numpy(session.run(None, {"input": x.numpy()})[0])


def _export_pt2(model: nn.Module, example: torch.Tensor, path: Path, cfg: Config) -> Runner:
    batch = torch.export.Dim("batch", min=1, max=4096)
    # serialized in memory: a failed write is then an OSError of our own write, not torch's zip writer
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(model, (example,), dynamic_shapes=({0: batch},)), buffer)
    with _writing(path), open_file(path.parent, path, "wb") as fh:
        fh.write(buffer.getvalue())
    loaded = torch.export.load(str(path)).module()
    return lambda x: loaded(x)


def _export_safetensors(model: nn.Module, example: torch.Tensor, path: Path, cfg: Config) -> Runner:
    try:
        from safetensors.torch import load_file, save
    except ImportError:
        raise ExportError("--format safetensors needs the safetensors package: pip install safetensors") from None
    network = model.network
    # float32 copies in contiguous memory, none sharing storage (tied weights): what save_file needs
    tensors = {
        key: value.detach().to(torch.float32 if value.is_floating_point() else value.dtype, copy=True).contiguous()
        for key, value in network.state_dict().items()
    }
    data = save(tensors, metadata={"format": "pt", "framework": f"regtrain {__version__}", "network": cfg.model.name})
    with _writing(path), open_file(path.parent, path, "wb") as fh:
        fh.write(data)
    rebuilt = build_network(cfg.model)  # a fresh network with the file's weights: what a user of the file does
    rebuilt.load_state_dict(load_file(str(path)))
    loaded = Prediction(rebuilt, cfg.model.prediction_key).eval()
    return lambda x: loaded(x)


EXPORTERS = {
    "onnx": (_export_onnx, "model.onnx"),
    "pt2": (_export_pt2, "model.pt2"),
    "safetensors": (_export_safetensors, "model.safetensors"),
}
FORMATS = tuple(EXPORTERS)


def export_network(cfg: Config, checkpoint: Checkpoint) -> Prediction:
    """The checkpoint's network as it is exported: its evaluation weights in a network built afresh in float32,
    without amp's casting (O2/O3 cast weights and inputs to bf16/fp16, which ONNX Runtime and a float32
    program refuse) and in contiguous memory (not channels_last)."""
    plain = dataclasses.replace(cfg, amp=AmpConfig(), model=dataclasses.replace(cfg.model, channels_last=False))
    network, _ = checkpoint_network(plain, checkpoint, torch.device("cpu"))
    return Prediction(network.float(), cfg.model.prediction_key).eval()


def _verified(cfg: Config, model: Prediction, fmt: str, staging: Path) -> float:
    """Export ``model`` into ``staging`` and return the largest difference of the file's outputs to the network's."""
    generator = torch.Generator().manual_seed(0)
    example = torch.randn(2, *cfg.model.input_size, generator=generator)
    check = torch.randn(3, *cfg.model.input_size, generator=generator)  # another batch size: the batch is dynamic
    exporter, name = EXPORTERS[fmt]
    with torch.no_grad(), quiet_exporters():
        exported = exporter(model, example, staging / name, cfg)
        return (exported(check).float() - model(check).float()).abs().max().item()


def export_checkpoint(cfg: Config, run: RunFolder, checkpoint: Checkpoint, fmt: str) -> Dict[str, Any]:
    """Export, verify and describe the checkpoint's network in ``run`` (rank 0; other ranks wait for nothing)."""
    if get_rank() != 0:
        return {}
    if not cfg.model.input_size:
        raise ConfigError(
            "--mode export needs model.input_size (one sample's shape, e.g. [3, 224, 224]) in the checkpoint's config or as an override"
        )
    write_config(cfg, run.config, EXPORT_ADVICE)
    model = export_network(cfg, checkpoint)
    name = EXPORTERS[fmt][1]
    path = run.path / name
    staging = run.path / f"{STAGING}{os.getpid()}"
    try:
        with _writing(staging):
            make_new_folder(run.path, staging)
        difference = _verified(cfg, model, fmt, staging)
        log.info(
            "exported %s (float32; trained at %s): largest difference to the network on a batch of 3: %.3g (tolerance %g)",
            path,
            cfg.amp.opt_level,
            difference,
            TOLERANCE,
        )
        if not difference <= TOLERANCE:  # NaN is refused too
            raise ExportError(
                f"the {fmt} export of '{checkpoint.source}' differs from the network by {difference:.3g} (> {TOLERANCE:g}); it was not kept"
            )
        for made in sorted(staging.iterdir()):  # the file, and ONNX's external weights beside a large model
            with _writing(run.path / made.name):
                replace(run.path, made, run.path / made.name)
    finally:
        with contextlib.suppress(OSError):
            remove_tree(run.path, staging)
    description = {
        "file": name,
        "format": fmt,
        "input": "batch x " + " x ".join(str(n) for n in cfg.model.input_size),
        "input_size": list(cfg.model.input_size),
        "mean": cfg.data.mean,
        "std": cfg.data.std,
        "classes": checkpoint.classes,
        "task": cfg.eval.metric,
        "opt_level": cfg.amp.opt_level,
        "exported_dtype": "float32",
        "network": cfg.model.name,
        "framework_version": __version__,
        "torch_version": torch.__version__,
        "max_abs_difference": difference,
        "tolerance": TOLERANCE,
        "checkpoint": str(checkpoint.source),
    }
    write_json(run.path / "model.json", description, EXPORT_ADVICE)
    return {"format": fmt, "max_abs_difference": f"{difference:.3g}", "tolerance": f"{TOLERANCE:g}", "file": str(path)}


def add_options(parser: ModeParser) -> None:
    add_config(parser)
    add_checkpoint(parser, "export")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="onnx",
        help="ONNX (default), a torch.export program, or the float32 weights as safetensors",
    )
    parser.add_argument("--output", help="the folder to write (default: output/<experiment>/export_NNN)")
    add_trust_file(parser)
    add_print_config(parser)


def run(args: argparse.Namespace) -> int:
    if args.print_config:
        return print_config(args, "export")
    start = prepare(args, "export")
    with opened(start, output=args.output) as started:
        report(
            "export", export_checkpoint(start.cfg, started.folder, start.checkpoint, args.format), start, started.folder
        )
    return 0


COMMAND = Command(
    "--mode export",
    "export",
    "write --checkpoint's network as --format into a folder of its own, checked against the network",
    add_options,
    run,
    needs_checkpoint,
)
