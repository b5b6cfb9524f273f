"""Bad input gets one ``error:`` line naming the problem and the fix, exit code 2, no traceback.

Each case is a row of the README's "Reliability" table.
"""

from __future__ import annotations

import re
import shutil
import struct
import zlib
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import torch
from PIL import Image

import main
from tests.conftest import fast_overrides
from utils.checkpoint.store import CheckpointStore

SMALL = "model.args.backbone_args={widths: [8, 16]}"


def image_tree(root: Path, bad: bool = False) -> Path:
    """``root/{train,val,test}/{a,b}/*.png``, 8x8 RGB; ``bad`` adds a file that is not an image."""
    rng = np.random.default_rng(0)
    for split in ("train", "val", "test"):
        for label in ("a", "b"):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(3):
                Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    if bad:
        (root / "train" / "a" / "broken.png").write_bytes(b"\x89PNG truncated")
    return root


def add_images(root: Path, *folders: str, size: tuple = (8, 8), name: str = "0.png") -> Path:
    """One RGB image of ``size`` (height, width) in each of ``folders`` under ``root``."""
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.zeros((*size, 3), dtype=np.uint8)).save(root / folder / name)
    return root


def add_bomb(root: Path) -> Path:
    """A PNG that declares 14000 x 14000 pixels (196 megapixels: PIL's DecompressionBombError)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", 14000, 14000, 1, 0, 0, 0, 0)
    (root / "train" / "a" / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))
    return root


def add_file(root: Path, rel: str, write) -> Path:
    """``write(path)`` for ``root/rel`` (a real file of the kind the case needs); returns ``root``."""
    write(root / rel)
    return root


def float_image(path: Path) -> None:
    Image.fromarray(np.linspace(0, 2.5, 64, dtype=np.float32).reshape(8, 8)).save(path)  # 32-bit float beyond [0, 1]


def label_mask(path: Path) -> None:
    """A segmentation label map (0, 1, 2) in place of a saliency mask, at the image's size."""
    shape = np.array(Image.open(path)).shape
    Image.fromarray((np.arange(shape[0] * shape[1]).reshape(shape) % 3).astype(np.uint8)).save(path)


def colour_mask(path: Path) -> None:
    shape = np.array(Image.open(path)).shape
    colours = np.zeros((*shape, 3), np.uint8)
    colours[: shape[0] // 2, :, 0], colours[shape[0] // 2 :, :, 2] = 255, 255  # red and blue halves on no black
    colours[0, 0] = 0
    Image.fromarray(colours).save(path)


def sod_folder(root: Path, *extra: str) -> List[str]:
    """An image_mask_folder run on ``root`` (see ``shapes``) with the sod demo config."""
    return ["--config", "configs/sod_shapes.yaml", f"experiment.output_root={root / 'out'}", "experiment.name=bad", "data.name=image_mask_folder",
            f"data.root={root}", "data.args={size: 32}", "data.batch_size=2", "train.epochs=1", *extra]


def shapes(root: Path) -> Path:
    """``root/{train,val,test}/{Image,Mask}``: 2 shapes_sod scenes each, of different sizes."""
    from utils.data.datasets.shapes_sod import write_split

    for split in ("train", "val", "test"):
        write_split(root, split, 2)
    return root


def rgb_folder(root: Path, *extra: str) -> List[str]:
    return ["data.name=image_folder", f"data.root={root}", "model.input_size=[3,8,8]", "model.args={num_classes: 2, backbone: small_cnn, backbone_args: {in_channels: 3, widths: [8]}}", "data.batch_size=2", *extra]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished 1-epoch digits run to resume or test against."""
    out = tmp_path_factory.mktemp("trained")
    assert main.main(fast_overrides(out, "run", epochs=1)) == 0
    return out


def _corrupt_all(ckpt_dir: Path) -> None:
    for path in ckpt_dir.glob("*.pt"):
        path.write_bytes(path.read_bytes()[:100])


# name -> (arguments given the tmp folder and the trained run's output root, expected message)
CASES: Dict[str, tuple] = {
    "unknown network": (lambda tmp, run: ["model.name=resnet_typo"], r"unknown network 'resnet_typo'; known: (.*, )?classifier \(Classifier\), .*minet \(MINet\)"),
    "unknown loss": (lambda tmp, run: ["loss=[{name: focal_typo}]"], r"unknown loss 'focal_typo'; known: .*cross_entropy"),
    "unknown config key": (lambda tmp, run: ["train.epoch=3"], r"unknown config key 'train.epoch'; did you mean 'train.epochs'\?"),
    "wrong value type": (lambda tmp, run: ["train.epochs=three"], r"config key 'train.epochs' must be an integer, got 'three' \(str\)"),
    "missing data folder": (lambda tmp, run: rgb_folder(tmp / "nowhere"), r"data folder '.*nowhere/train' does not exist; expected <root>/train/<class>/<image>"),
    "empty data folder": (lambda tmp, run: (tmp / "empty" / "train").mkdir(parents=True) or rgb_folder(tmp / "empty"), r"data folder '.*empty/train' holds no images"),
    "unreadable image": (lambda tmp, run: rgb_folder(image_tree(tmp / "imgs", bad=True)), r"cannot read image '.*broken.png' \(UnidentifiedImageError\); fix or remove the file, or set data.args.on_bad_sample=skip"),
    "wrong channel count": (lambda tmp, run: [SMALL.replace("widths", "in_channels: 3, widths")], r"the data has 1 channel\(s\) per input but the network's first layer expects 3; set the backbone's in_channels"),
    "checkpoint path missing": (lambda tmp, run: ["--mode", "test", "--checkpoint", str(tmp / "missing.pt")], r"checkpoint '.*missing.pt' does not exist; check the path"),
    "corrupt checkpoint": (lambda tmp, run: (tmp / "c.pt").write_bytes(b"garbage") and ["--mode", "test", "--checkpoint", str(tmp / "c.pt")], r"checkpoint '.*c.pt' is corrupt or not a PyTorch file"),
    "--resume without a checkpoint": (lambda tmp, run: ["--resume"], r"--resume: no checkpoint in '.*'; train without --resume first"),
    "resume with a changed model": (lambda tmp, run: [*fast_overrides(run, "run", epochs=2), "--resume", "model.args.backbone_args={widths: [8, 32]}", "data.batch_size=32"],
                                    r"cannot resume from '.*': the config changed the model or the data \(data.batch_size: 64 -> 32; model.args.backbone_args.widths: \[8, 16\] -> \[8, 32\]\); .*--resume-force"),
    "checkpoint of another network": (lambda tmp, run: ["--mode", "test", "--checkpoint", str(run / "run" / "latest" / "checkpoints" / "last.pt"), "model.args.backbone_args={widths: [8, 32]}"],
                                      r"does not fit network 'classifier' \(.*shape \(checkpoint -> network\): backbone.stages.1.0.0.weight: \(16, 8, 3, 3\) -> \(32, 8, 3, 3\).*\); it was saved by another network"),
    "unknown hook argument": (lambda tmp, run: ["hooks=[{name: saliency_grid, imagez: 4}]"], r"hook 'saliency_grid' got unknown argument\(s\) \['imagez'\]; it takes: images, size, splits"),
    "hook switch not a bool": (lambda tmp, run: ["hooks=[{name: confusion_matrix, enabled: maybe}]"], r"config key 'hooks\[0\].enabled' must be true or false, got 'maybe'"),
    "bad profiler schedule": (lambda tmp, run: ["train.profile={wait: 1}"], r"config key 'train.profile' must look like \{wait: 1, warmup: 1, active: 5\} \(wait, warmup >= 0, active >= 1\), got \{'wait': 1\}"),
    "bit-flipped checkpoint (--mode test)": (lambda tmp, run: _flipped_best(run, tmp), r"checkpoint '.*best.pt': checksum mismatch \(stored [0-9a-f]{12}\.\.\., file [0-9a-f]{12}\.\.\.\): the file is truncated or corrupt; .*delete its .sha256"),
    "an output root that cannot be created": (lambda tmp, run: ["experiment.output_root=/proc/regtrain_out", "experiment.name=bad"],
                                              r"cannot create a run folder in '/proc/regtrain_out/bad' \(.*\); set experiment.output_root to a writable folder"),
    "train.log_every=0 (before any data is read)": (lambda tmp, run: ["train.log_every=0", *rgb_folder(tmp / "nowhere")], r"config key 'train.log_every' must be >= 1 \(log every N steps\), got 0"),
    "misspelt eval.monitor (before any data is read)": (lambda tmp, run: ["eval.monitor=top_1", *rgb_folder(tmp / "nowhere")],
                                                        r"config key 'eval.monitor' is 'top_1', but metric 'classification' reports \['top1', 'top5', 'loss'\]; did you mean 'top1'\?"),
    "unknown network argument (before any data is read)": (lambda tmp, run: [*rgb_folder(tmp / "nowhere"), "model.args.widht=3"], r"network 'classifier' got unknown argument\(s\) \['widht'\]; it takes: num_classes, backbone"),
    "custom_imports module missing": (lambda tmp, run: ["custom_imports=[my_project.no_such_module]"], r"custom_imports: no module named 'my_project.no_such_module'; give an importable module path"),
    "custom_imports module that does not import": (lambda tmp, run: ["custom_imports=[tests.fixtures.broken_import]"],
                                                   r"custom_imports: module 'tests.fixtures.broken_import' does not import at .*broken_import.py:3: No module named 'regtrain_missing_dependency'; install the missing package or fix that import"),
    "custom_imports given as a file": (lambda tmp, run: ["custom_imports=[hook/my_hook.py]"], r"custom_imports: 'hook/my_hook.py' is not a module path; give the module as you would import it \(e.g. hook.my_hook\)"),
    "device=cuda without CUDA": (lambda tmp, run: _without_cuda(["device=cuda"]), r"device=cuda needs a CUDA device, but CUDA is not available here; use device=cpu or device=auto"),
    "class folder that the train split lacks": (lambda tmp, run: rgb_folder(add_images(image_tree(tmp / "imgs"), "val/c")),
                                                r"class folder\(s\) \['c'\] in '.*imgs/val' are not classes of the training split \(a, b\); remove them, add them to the train split, or list every class in data.args.classes"),
    "more classes than the network's outputs": (lambda tmp, run: rgb_folder(add_images(image_tree(tmp / "imgs"), "train/c", "val/c")),
                                                r"the data has 3 classes \(a, b, c\) but the network outputs 2 score\(s\) per sample; give the network 3 outputs \(e.g. model.args.num_classes=3\) or train on fewer classes"),
    "decompression bomb (image_folder)": (lambda tmp, run: rgb_folder(add_bomb(image_tree(tmp / "imgs"))),
                                          r"cannot read image '.*bomb.png' \(DecompressionBombError\); fix or remove the file, or set data.args.on_bad_sample=skip"),
    "images of mixed sizes without a resize": (lambda tmp, run: rgb_folder(add_images(image_tree(tmp / "imgs"), "train/a", size=(10, 12), name="big.png"), "data.batch_size=7"),
                                               r"images of different sizes cannot form a batch: .*big.png' is 12x10.*\(width x height, after the transforms\); resize them all to one size: data.args.image_size=N, or a Resize"),
    "unreadable image in a loader worker": (lambda tmp, run: rgb_folder(image_tree(tmp / "imgs", bad=True), "data.num_workers=1"),
                                            r"^error: cannot read image '.*broken.png' \(UnidentifiedImageError\); fix or remove the file, or set data.args.on_bad_sample=skip$"),
    "train.compile with DataParallel": (lambda tmp, run: ["train.compile=true", "dist.mode=dp"],
                                        r"train.compile does not work with dist.mode=dp \(.*\); use dist.mode=ddp under torchrun, or turn train.compile off"),
    "lr_scaling with a global batch": (lambda tmp, run: ["data.global_batch_size=64", "optim.lr_scaling=linear"],
                                      r"config key 'optim.lr_scaling' is linear, which scales the LR with the world size, but data.global_batch_size keeps the global batch the same at every world size; set optim.lr_scaling=none"),
    "resume on another world size without a global batch": (lambda tmp, run: _as_if_two_ranks(run, tmp) + ["--resume"],
                                                            r"cannot resume from '.*': the config changed the model or the data \(world size: 2 -> 1, which changes the global batch from 2 x 64 = 128 to 1 x 64 = 64 samples \(resume with 2 processes; a run started with data.global_batch_size resumes on any world size that divides it\)\)"),
    "32-bit float image beyond [0, 1] (image_folder)": (lambda tmp, run: rgb_folder(add_file(image_tree(tmp / "imgs"), "train/a/f.tif", float_image)),
                                                         r"image '.*train/a/f.tif' is 32-bit float \(PIL mode F\) with values from 0 to 2.5, outside the 0..1 it is read from; save it scaled to \[0, 1\], or as 8- or 16-bit integers, or set data.args.on_bad_sample=skip"),
    "data.args.channels not 1 or 3": (lambda tmp, run: rgb_folder(image_tree(tmp / "imgs"), "data.args={channels: 2}"), r"image_folder: data.args.channels must be 1 \(grey\) or 3 \(RGB\), got 2"),
    "unreadable mask (image_mask_folder)": (lambda tmp, run: sod_folder(add_file(shapes(tmp / "sod"), "train/Mask/train_00001.png", lambda p: p.write_bytes(b"not a png"))),
                                            r"cannot read mask '.*train/Mask/train_00001.png' \(UnidentifiedImageError\); fix or remove the file, or set data.args.on_bad_sample=skip"),
    "label map as a mask (image_mask_folder)": (lambda tmp, run: sod_folder(add_file(shapes(tmp / "sod"), "train/Mask/train_00001.png", label_mask)),
                                                r"mask '.*train_00001.png' holds the values 0, 1, 2: the largest is below half of the range 0..255 it falls in \(label indices\?\); save it as grey with 0 for the background and 255 for the object \(soft values between\), or set data.args.on_bad_sample=skip"),
    "mask of several colours (image_mask_folder)": (lambda tmp, run: sod_folder(add_file(shapes(tmp / "sod"), "train/Mask/train_00001.png", colour_mask)),
                                                    r"mask '.*train_00001.png' holds 3 colours \(\(0, 0, 0\), \(0, 0, 255\), \(255, 0, 0\)\); a saliency mask is grey, or one colour on black: save it as grey"),
    "images of mixed sizes with size: null (image_mask_folder)": (lambda tmp, run: sod_folder(shapes(tmp / "sod"), "data.args={size: null}"),
                                                                  r"images of different sizes cannot form a batch: '.*/train/Image/train_0000[01].png' is \d+x\d+ and '.*/train/Image/train_0000[01].png' is \d+x\d+ \(width x height, after the transforms\); resize them all to one size: data.args.size=N \(or \[height, width\]\)"),
    "missing test split (image_folder)": (lambda tmp, run: shutil.rmtree(image_tree(tmp / "imgs") / "test") or rgb_folder(tmp / "imgs"),
                                          r"data folder '.*imgs/test' does not exist; expected <root>/test/<class>/<image>; data.test_split names the split folder that testing reads \(e.g. data.test_split=val\)"),
    "empty class folder (image_folder)": (lambda tmp, run: (image_tree(tmp / "imgs") / "train" / "c").mkdir() or rgb_folder(tmp / "imgs"),
                                          r"class folder '.*imgs/train/c' holds no images \(looked for .jpg, .*\); add its images or remove the folder"),
    "crop larger than the image": (lambda tmp, run: rgb_folder(image_tree(tmp / "imgs"), "data.train_transforms=[{name: RandomCrop, size: 12}]"),
                                   r"data.train_transforms: a crop of 12x12 is larger than the image it gets, 8x8 \(width x height\); put a Resize before it, make the crop smaller, or let RandomCrop pad \(pad_if_needed: true\)"),
    "every checkpoint corrupt": (lambda tmp, run: _copy_corrupt(run, tmp) + ["--resume"], r"no usable checkpoint in '.*': .*checksum mismatch.*move the folder away to start afresh"),
    # every value checked where it enters (before any data is read, unless the case says otherwise)
    "negative lr_mult": (lambda tmp, run: ["optim.param_groups=[{pattern: 'head.*', lr_mult: -1}]"], r"^error: config key 'optim.param_groups\[0\].lr_mult' must be a finite number >= 0, got -1$"),
    "infinite float key": (lambda tmp, run: ["schedule.warmup_epochs=.inf"], r"^error: config key 'schedule.warmup_epochs' must be a finite number, got inf$"),
    "warm-up longer than the run": (lambda tmp, run: ["schedule.warmup_epochs=5"],
                                    r"^error: config key 'schedule.warmup_epochs' is 5 but train.epochs is 1: the warm-up would outlast the run, so the LR would peak at its last step; set schedule.warmup_epochs to at most 1"),
    "a float where an int is meant": (lambda tmp, run: ["model.args.num_classes=1e1"],
                                      r"^error: config key 'model.args.num_classes' must be an integer >= 1 \(an argument of network 'classifier'\), got 10.0 \(float\)$"),
    "a negative class count": (lambda tmp, run: ["model.args.num_classes=-3"], r"^error: config key 'model.args.num_classes' must be an integer >= 1 \(an argument of network 'classifier'\), got -3"),
    "a backbone argument out of range": (lambda tmp, run: ["model.args.backbone_args={widths: [8, 0]}"],
                                         r"^error: config key 'model.args.backbone_args.widths' must be a list of integers >= 1 with at least one entry \(an argument of backbone 'small_cnn'\), got \[8, 0\]"),
    "an empty loss list": (lambda tmp, run: ["loss=[]"], r"^error: config key 'loss' is empty: training needs at least one loss; give one, e.g. loss=\[\{name: cross_entropy\}\]$"),
    "val_fraction 0": (lambda tmp, run: ["data.args.val_fraction=0"], r"^error: config key 'data.args.val_fraction' must be a number in \(0, 1\) \(an argument of dataset 'digits'\), got 0"),
    "val_fraction -0.1": (lambda tmp, run: ["data.args.val_fraction=-0.1"], r"^error: config key 'data.args.val_fraction' must be a number in \(0, 1\)"),
    "val_fraction 0.9 (no training samples left)": (lambda tmp, run: ["data.args.val_fraction=0.9"],
                                                     r"^error: digits: data.args.val_fraction=0.9 and data.args.test_fraction=0.2 leave no training samples of the 1797; make their sum smaller"),
    "config file not UTF-8": (lambda tmp, run: (tmp / "latin.yaml").write_bytes("optim:\n  lr: 0.1  # caf\u00e9\n".encode("latin-1")) and ["--config", str(tmp / "latin.yaml")],
                              r"^error: config file '.*latin.yaml' is not UTF-8 text \(byte 0xe9 at offset 23: invalid continuation byte\); save it as UTF-8"),
    "missing config file": (lambda tmp, run: ["--config", "configs/digits_resnt18.yaml"],
                            r"^error: config file 'configs/digits_resnt18.yaml' does not exist; did you mean 'configs/digits_resnet18.yaml'\?$"),
    "train.ema=true": (lambda tmp, run: ["train.ema=true"], r"^error: config key 'train.ema' must be a mapping \(e.g. \{decay: 0.9998\}\) or null, got True \(bool\)$"),
    "a torchmetrics class for other data": (lambda tmp, run: ["eval.extra_metrics=[{name: MeanSquaredError}]"],
                                            r"^error: eval.extra_metrics\[0\] \(MeanSquaredError\) does not fit the outputs of eval.metric=classification: given scores \[4, 10\] \(float\) and class indices \[4\], it raised RuntimeError: .*; choose a multiclass metric"),
    "a torchmetrics num_classes the data contradicts (after the data is built)": (lambda tmp, run: ["data.args.classes=[0, 1, 2]", "eval.extra_metrics=[{name: MulticlassF1Score, num_classes: 10}]"],
                                                                                  r"^error: eval.extra_metrics\[0\] \(MulticlassF1Score\) has num_classes=10, but the data has 3 classes; leave num_classes out"),
    "timm out_indices out of range": (lambda tmp, run: ["model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: resnet18, in_chans: 1, out_indices: [0, 7]}}"],
                                      r"^error: backbone timm: out_indices \[0, 7\] are out of range for resnet18, which has 5 feature stages; give indices from 0 to 4"),
    "timm argument unknown to the model": (lambda tmp, run: ["model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: resnet18, in_chans: 1, drop_rat: 0.1}}"],
                                           r"^error: backbone timm: resnet18 got an argument it does not take, 'drop_rat' .*; remove it from model.args.backbone_args; ResNet takes: .*drop_rate"),
    "timm model of a fixed input size": (lambda tmp, run: ["model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: vit_tiny_patch16_224}}", "model.input_size=[3, 32, 32]"],
                                         r"^error: backbone timm: vit_tiny_patch16_224 takes inputs of 224x224 only \(timm's fixed_input_size\), but model.input_size is \[3, 32, 32\]; set model.input_size=\[3, 224, 224\]"),
    "a run that would take no step": (lambda tmp, run: rgb_folder(add_images(tmp / "one", "train/a", "val/a", "test/a")),
                                      r"^error: training would take no step: the training split has 1 sample\(s\) per process and data.batch_size is 2; its only batch would hold 1 sample, .*data.drop_last"),
    "a hook named twice": (lambda tmp, run: ["hooks=[{name: confusion_matrix}, {name: ConfusionMatrix, enabled: false}]"],
                           r"^error: config key 'hooks' names hook 'confusion_matrix' twice \(hooks\[0\] and hooks\[1\]\); give each hook once"),
    "a backbone given as the network": (lambda tmp, run: ["model.name=resnet18"],
                                        r"^error: unknown network 'resnet18': resnet18 is a backbone, not a network; a network takes it: model.name=classifier model.args.backbone=resnet18"),
}


def _flipped_best(run: Path, tmp: Path) -> List[str]:
    """A copy of the run whose best.pt has one flipped byte in its tensor data (it still loads)."""
    shutil.copytree(run / "run", tmp / "flipped", symlinks=True)
    best = tmp / "flipped" / "latest" / "checkpoints" / "best.pt"
    data = bytearray(best.read_bytes())
    data[len(data) // 2] ^= 0xFF
    best.write_bytes(bytes(data))
    return ["--mode", "test", "--checkpoint", str(best)]


def _without_cuda(args: List[str]) -> List[str]:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    return args


def _as_if_two_ranks(run: Path, tmp: Path) -> List[str]:
    """A copy of the run whose newest checkpoint says 2 processes wrote it (re-saved with its checksum)."""
    shutil.copytree(run / "run", tmp / "out" / "two", symlinks=True)
    store = CheckpointStore(tmp / "out" / "two" / "latest" / "checkpoints")
    data = torch.load(store.latest_usable(), weights_only=False)
    data["world_size"] = 2
    store.best = data["loop"]["checkpointer"]["best"]
    store.save(data, data["progress"]["epoch"], data["progress"]["batch"])
    return fast_overrides(tmp / "out", "two", epochs=2)


def _copy_corrupt(run: Path, tmp: Path) -> List[str]:
    shutil.copytree(run / "run", tmp / "out" / "broken", symlinks=True)
    _corrupt_all(tmp / "out" / "broken" / "latest" / "checkpoints")
    return fast_overrides(tmp / "out", "broken", epochs=2)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if "loader worker" in c else c for c in sorted(CASES)])  # a worker process
def test_bad_input_is_one_line_and_exit_code_2(case, tmp_path, trained, capsys):
    make_args, expected = CASES[case]
    args = make_args(tmp_path, trained)
    if not any(a.startswith("experiment.output_root") for a in args):
        args = [*fast_overrides(tmp_path / "out", "bad", epochs=1), *args]
    assert main.main(args) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert re.search(expected, errors[0]), errors[0]
    assert "Traceback" not in err


def test_unreadable_images_are_skipped_with_a_warning_when_asked(tmp_path, caplog):
    args = [*fast_overrides(tmp_path / "out", "skip", epochs=1), *rgb_folder(image_tree(tmp_path / "imgs", bad=True), "data.args={on_bad_sample: skip}")]
    assert main.main(args) == 0
    assert re.search(r"skipping unreadable image '.*broken.png'", caplog.text)


def test_resume_force_accepts_a_changed_data_config(trained, tmp_path, caplog):
    shutil.copytree(trained / "run", tmp_path / "run", symlinks=True)  # the shared run stays as the other cases expect it
    args = [*fast_overrides(tmp_path, "run", epochs=2), "--resume-force", "data.batch_size=32"]
    assert main.main(args) == 0
    assert "--resume-force: resuming" in caplog.text and "data.batch_size: 64 -> 32" in caplog.text


def test_values_as_users_type_them_run(tmp_path, capsys):
    """Exponent-form numbers on the command line (YAML 1.1 reads 1e-3 as a string)."""
    assert main.main([*fast_overrides(tmp_path, "typed", epochs=1), "optim.lr=1e-3", "optim.weight_decay=5e-4"]) == 0
    assert "test: top1=" in capsys.readouterr().out
