"""The command line of ``main.py``: its options, the modes that read each, the checks between them, and the config they name."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import List, Optional

from utils.checkpoint.saved_config import checkpoint_base, how_to_import, not_imported
from utils.checkpoint.state import Checkpoint
from utils.commands.export import FORMATS as EXPORT_FORMATS
from utils.commands.predict import dataset_check_view
from utils.config import Config
from utils.config_load import load_config
from utils.errors import RegistryError, one_line
from utils.references import check_references, import_custom

# each option and the modes that read it; what to do instead, where the option would mislead
MODE_OPTIONS = {
    "config": ("train", "test", "predict", "export", "pack"),  # compare reads the runs' own config.yaml
    "trust_file": ("train", "test", "predict", "export"),
    "checkpoint": ("test", "predict", "export"),
    "input": ("predict",),
    "output": ("predict", "export", "compare", "pack"),
    "shard_size": ("pack",),
    "workers": ("pack",),
    "format": ("export",),
    "resume": ("train",),
    "resume_force": ("train",),
    "reset_optimizer": ("train",),
    "sweep": ("train",),
}
COMPARE_KEY = "custom_imports="  # the one override --mode compare takes beside its PATHs
INSTEAD = {
    "checkpoint": "; training never starts from it: to start from its weights use model.pretrained=FILE, to continue its run use --resume FILE"
}


def command_line(argv: Optional[List[str]], description: str) -> argparse.Namespace:
    """``main.py``'s arguments; an option the mode does not read is refused (exit 2), as is a mode without --checkpoint."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="experiment YAML file (defaults: utils/config.py)")
    parser.add_argument(
        "--mode",
        choices=("train", "test", "predict", "export", "compare", "pack"),
        default="train",
        help="train (default): train the config's network; test: evaluate --checkpoint on data.test_split; "
        "predict: run --checkpoint on the --input images; export: write --checkpoint's network as --format; "
        "compare: the runs of the PATHs by configuration (mean, std, 95%% interval, p-value over seeds); "
        "pack: write the config's dataset as shards into --output (a folder or s3://bucket/prefix)",
    )
    parser.add_argument(
        "--checkpoint", help="test, predict, export: the checkpoint to use (its saved config is the base)"
    )
    parser.add_argument(
        "--input",
        help="predict: an image file, a folder of images, a glob, or a packed split (DIR/<split> or s3://bucket/prefix/<split>)",
    )
    parser.add_argument(
        "--output",
        help="predict, export, compare: the folder to write (default: output/<experiment>/<mode>_NNN); pack: a folder or s3://bucket/prefix",
    )
    parser.add_argument("--shard-size", help="pack: bytes per shard, e.g. 64MB (the default)")
    parser.add_argument(
        "--workers",
        type=int,
        help="pack: processes writing shards (default: the usable cores); any count packs the same bytes",
    )
    parser.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        help="export: ONNX (default), a torch.export program, or the float32 weights as safetensors",
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="RUN_OR_CHECKPOINT",
        help="continue the experiment's newest run (output/<experiment>/latest), or the run folder or checkpoint given",
    )
    parser.add_argument(
        "--resume-force", action="store_true", help="resume even though the model or data config changed"
    )
    parser.add_argument(
        "--reset-optimizer",
        action="store_true",
        help="resume without the optimizer state (needed when optim.name changed)",
    )
    parser.add_argument(
        "--trust-file",
        action="append",
        default=[],
        metavar="PATH",
        help="load this checkpoint or weights file (or .dcp directory) with full unpickling, which runs any code it holds; only for files you trust (repeatable)",
    )
    # torch.distributed.launch passes --local-rank=N (older PyTorch: --local_rank N); torchrun sets LOCAL_RANK.
    parser.add_argument(
        "--sweep",
        metavar="SWEEP.yaml",
        help="train the sweep's trials (Optuna): every configuration of its space once per seed, as ordinary runs",
    )
    parser.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
    parser.add_argument("--debug", action="store_true", help="show tracebacks for input errors")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key.sub=value",
        help="config overrides; --mode compare: the PATHs to compare (experiment, sweep or run folders) and "
        "custom_imports=[...], the modules of a metric of your own",
    )
    args = parser.parse_intermixed_args(argv)  # options may follow key=value overrides
    for dest, modes in MODE_OPTIONS.items():  # an option the mode does not read would do nothing: refused
        if args.mode not in modes and getattr(args, dest) not in (None, False, []):
            parser.error(
                f"--{dest.replace('_', '-')} does nothing in --mode {args.mode}: it is for --mode {'/'.join(modes)}{INSTEAD.get(dest, '')}"
            )
    args.format = args.format or "onnx"
    if isinstance(args.resume, str) and "=" in args.resume and not Path(args.resume).exists():
        args.overrides.append(args.resume)  # "--resume key=value": an override, not a path
        args.resume = True
    args.resume = args.resume or args.resume_force or args.reset_optimizer
    if args.sweep and args.resume:
        parser.error("--sweep continues by itself (the same command again resumes its trials): leave out --resume")
    if args.local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", str(args.local_rank))
    # compare reads finished runs: its positional arguments are folders, not overrides, but for the one key it
    # reads from the user (the runs' files are data: the modules of a metric of the user's own)
    args.paths, args.overrides = ([], args.overrides)
    if args.mode == "compare":
        args.paths = [item for item in args.overrides if not item.startswith(COMPARE_KEY)]
        args.overrides = [item for item in args.overrides if item.startswith(COMPARE_KEY)]
    if args.mode == "compare" and not args.paths:
        parser.error("--mode compare needs at least one PATH: an experiment folder, a sweep folder or run folders")
    if args.mode == "pack" and not args.output:
        parser.error("--mode pack needs --output DIR or s3://bucket/prefix")
    if args.mode not in ("train", "compare", "pack") and not args.checkpoint:
        parser.error(f"--mode {args.mode} needs --checkpoint PATH")
    return args


def resolve_config(args: argparse.Namespace, checkpoint: Optional[Checkpoint]) -> Config:
    """Test, predict and export start from the config saved in the checkpoint (``checkpoint_base``); the file and
    overrides apply on top. Only the user's ``custom_imports`` are imported."""
    cfg = load_config(args.config, args.overrides, base=checkpoint_base(checkpoint) if checkpoint is not None else None)
    import_custom(cfg.custom_imports, [cfg.experiment.output_root])
    try:  # the registries know the custom imports' names now; predict reads data.args.on_bad_sample itself, whatever the dataset takes
        check_references(dataset_check_view(cfg) if args.mode == "predict" else cfg)
    except RegistryError as err:
        left_out = not_imported(checkpoint, cfg)
        if not left_out:
            raise
        raise RegistryError(f"{one_line(err)}; {how_to_import(left_out, args.mode)}") from None
    return cfg
