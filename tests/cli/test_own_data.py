"""A new user's own data on the first try (docs/data.md, "The network's shape from the data"): a folder of any
number of classes, channels and size trains with ``data.name=image_folder data.root=DIR`` alone, test and predict
read what the data decided back from config.yaml, a value that contradicts the data is one line, and an option
that names a config key is one line naming the override."""

from __future__ import annotations

import subprocess

import pytest
import torch

import main
from tests.conftest import ROOT, subprocess_env
from tests.fixtures.bad_input import error_line
from utils.config.load import load_config
from utils.errors import ConfigError, DataError


def write_folder(root, classes, size, mode: str, suffix: str, per_split: int = 4) -> None:
    """``root/<split>/<class>/<n>.<suffix>``: random images of ``size`` (width, height) in PIL ``mode``; a list of
    sizes is used in turn."""
    from PIL import Image

    generator = torch.Generator().manual_seed(0)
    sizes = size if isinstance(size, list) else [size]
    for split in ("train", "val", "test"):
        for name in classes:
            (root / split / name).mkdir(parents=True)
            for n in range(per_split):
                width, height = sizes[n % len(sizes)]
                channels = 1 if mode == "L" else 3
                pixels = torch.randint(0, 256, (height, width, channels), generator=generator, dtype=torch.uint8)
                image = Image.fromarray(pixels.squeeze(-1).numpy() if channels == 1 else pixels.numpy(), mode)
                image.save(root / split / name / f"{n}.{suffix}")


@pytest.fixture(scope="module")
def own_folders(tmp_path_factory):
    """A new user's first folders: 2-class 20x20 RGB PNGs, 3-class 28x28 grey JPEGs, and 2-class RGB PNGs of two
    sizes (24x24 the most common)."""
    root = tmp_path_factory.mktemp("own")
    write_folder(root / "rgb", ["cat", "dog"], (20, 20), "RGB", "png")
    write_folder(root / "grey", ["a", "b", "c"], (28, 28), "L", "jpg")
    write_folder(root / "mixed", ["x", "y"], [(24, 24), (24, 24), (24, 24), (30, 20)], "RGB", "png")
    return root


def own_run(server, tmp_path, *args: str) -> subprocess.CompletedProcess:
    """``python main.py data.name=image_folder ARGS``: one epoch of batches of 8, under ``tmp_path``."""
    argv = ["data.name=image_folder", f"experiment.output_root={tmp_path}", "train.epochs=1", "data.batch_size=8"]
    return server.run([*argv, *args], ROOT, subprocess_env(), timeout=240)


@pytest.mark.slow  # two runs, a test and a predict of the second, forked
def test_a_folder_of_any_classes_channels_and_size_trains_with_no_other_setting(main_server, own_folders, tmp_path):
    """A 2-class RGB folder needed model.input_size, then the backbone's in_channels typed by hand, and kept 10
    outputs; the data decides them now, and the run's config.yaml holds them for test and predict."""
    for folder, (classes, channels, side) in {"rgb": (2, 3, 20), "grey": (3, 1, 28)}.items():
        proc = own_run(main_server, tmp_path / folder, f"data.root={own_folders / folder}")
        assert proc.returncode == 0, proc.stderr[-3000:]
        (line,) = [line for line in proc.stderr.splitlines() if "from the data 'image_folder'" in line]
        assert f"model.args.num_classes={classes}, model.args.backbone_args.in_channels={channels}" in line, line
        assert f"model.input_size=[{channels}, {side}, {side}]" in line and ("data.args.channels=1" in line) == (
            channels == 1
        )
        (run,) = (tmp_path / folder / "image_folder_small_cnn").glob("run_*")
        saved = load_config(run / "config.yaml")
        assert saved.model.args["num_classes"] == classes and saved.model.input_size == [channels, side, side]
        assert saved.model.args["backbone_args"]["in_channels"] == channels
        test_line = [line for line in proc.stdout.splitlines() if line.startswith("test: ")]
        assert test_line and f"INFO {test_line[0]}\n" in (run / "log.txt").read_text()  # the log tells it all
    checkpoint = str(run / "checkpoints" / "best.pt")
    tested = main_server.run(["--mode", "test", "--checkpoint", checkpoint], ROOT, subprocess_env(), timeout=240)
    assert tested.returncode == 0 and "test: top1=" in tested.stdout, tested.stderr[-3000:]
    inputs = str(own_folders / "grey" / "test" / "a")
    predicted = main_server.run(
        ["--mode", "predict", "--checkpoint", checkpoint, "--input", inputs], ROOT, subprocess_env(), timeout=240
    )
    assert predicted.returncode == 0 and "predict: inputs=4 predicted=4" in predicted.stdout, predicted.stderr[-3000:]


@pytest.mark.slow  # four runs, forked
def test_a_set_value_that_contradicts_the_data_is_one_line(main_server, own_folders, tmp_path):
    rgb = f"data.root={own_folders / 'rgb'}"
    # one score on 2 classes: a 53-line IndexError from cross-entropy
    line = error_line(own_run(main_server, tmp_path / "one", rgb, "model.args.num_classes=1"))
    assert "model.args.num_classes=1 gives one score per sample, but the data has 2 classes (cat, dog)" in line
    assert line.endswith("set model.args.num_classes=2, or leave it out (the data decides)"), line
    # more scores than classes trained without a word
    proc = own_run(main_server, tmp_path / "five", rgb, "model.args.num_classes=5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    warned = [
        line for line in proc.stderr.splitlines() if "model.args.num_classes=5, but the data has 2 classes" in line
    ]
    assert len(warned) == 1 and "set model.args.num_classes=2" in warned[0]
    # a crop larger than the padded samples: a 76-line ValueError from torchvision
    crop = "data.train_transforms=[{name: RandomCrop, size: 12, padding: 1}]"
    line = error_line(
        main_server.run(
            [f"experiment.output_root={tmp_path / 'crop'}", "train.epochs=1", crop], ROOT, subprocess_env(), timeout=240
        )
    )
    assert "a crop of 12x12 is larger than the image it gets, 10x10 once padded" in line and "Resize" in line, line
    # a folder of two sizes trains at the most common one, and says so once
    proc = own_run(main_server, tmp_path / "mixed", f"data.root={own_folders / 'mixed'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    warned = [line for line in proc.stderr.splitlines() if "differ in size" in line]
    assert len(warned) == 1 and "24x24 (6), 30x20 (2) of 8 read" in warned[0] and "image_size=24" in warned[0]
    assert "model.input_size=[3, 24, 24]" in proc.stderr


def test_a_folder_whose_most_common_size_is_not_square_names_the_sizes_and_the_setting(tmp_path):
    from utils.data.shape_from_data import settle_images
    from utils.registry import DATASETS

    write_folder(tmp_path / "wide", ["x", "y"], [(30, 20), (30, 20), (24, 24)], "RGB", "png", per_split=3)
    cfg = load_config(None, ["data.name=image_folder", f"data.root={tmp_path / 'wide'}"])
    train = DATASETS.build("image_folder", split="train", root=cfg.data.root)
    with pytest.raises(DataError, match=r"differ in size \(30x20 \(4\), 24x24 \(2\) of 6 read.*data.args.image_size=N"):
        settle_images(cfg, frozenset({"data.name", "data.root"}), train)
    given = load_config(None, ["data.name=image_folder", "model.input_size=[3, 24, 24]"])
    assert given.model.input_size == [3, 24, 24] and cfg.model.input_size is None  # left out: the data's


def test_an_option_that_names_a_config_key_is_one_line_with_the_override(capsys):
    """--epochs 5 and --mode eval got argparse's 6-9 line usage block and no hint of train.epochs=5."""
    for argv, want in (
        (
            ["--epochs", "5"],
            "unrecognized arguments: --epochs; config keys are set as key=value, not as options: train.epochs=5",
        ),
        (["--lr=0.1"], "not as options: optim.lr=0.1"),
        (
            ["--mode", "eval"],
            "invalid choice: 'eval' (choose from 'train', 'test', 'predict', 'export', 'pack', 'compare'); "
            "to evaluate a checkpoint: --mode test --checkpoint PATH",
        ),
    ):
        with pytest.raises(SystemExit) as stopped:
            main.main(argv)
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and err.count("\n") == 1 and "usage:" not in err, err
        assert ": error: " in err and want in err, err  # argparse names its prog (sys.argv[0]: -c under xdist)


def write_masks_and_videos(root) -> None:
    """``root/sod/<split>/{Image,Mask}``: 24x24 RGB JPEGs with square masks; ``root/vid/<split>/<class>/<video>``:
    3 videos of 8 16x16 frames per class of 2."""
    from PIL import Image

    generator = torch.Generator().manual_seed(0)

    def rgb(side: int):
        return Image.fromarray(torch.randint(0, 256, (side, side, 3), generator=generator, dtype=torch.uint8).numpy())

    mask = torch.zeros(24, 24, dtype=torch.uint8)
    mask[6:18, 6:18] = 255
    for split in ("train", "val", "test"):
        for kind in ("Image", "Mask"):
            (root / "sod" / split / kind).mkdir(parents=True)
        for n in range(4):
            rgb(24).save(root / "sod" / split / "Image" / f"{n}.jpg")
            Image.fromarray(mask.numpy()).save(root / "sod" / split / "Mask" / f"{n}.png")
        for name in ("p", "q"):
            for video in range(3):
                (root / "vid" / split / name / f"v{video}").mkdir(parents=True)
                for frame in range(8):
                    rgb(16).save(root / "vid" / split / name / f"v{video}" / f"{frame}.jpg")


@pytest.mark.slow  # two runs, forked
def test_mask_and_video_folders_take_their_shape_from_the_data_too(main_server, tmp_path):
    write_masks_and_videos(tmp_path)
    sod = ["data.name=image_mask_folder", f"data.root={tmp_path / 'sod'}", "data.args.size=32", "model.name=fpn_sod"]
    sod += ["model.args={backbone: small_cnn}", "eval.metric=sod", "eval.monitor=mae", "loss=[{name: bce_with_logits}]"]
    video = ["data.name=video_frames_folder", f"data.root={tmp_path / 'vid'}", "data.args={clip_len: 4, num_clips: 1}"]
    video += ["model.name=video_classifier", "model.args={backbone: small_3d_cnn}", "eval.metric=video"]
    video += ["eval.monitor=video_top1"]
    for args, taken in (
        (sod, "model.args.in_channels=3, model.input_size=[3, 32, 32]"),
        (video, "model.args.num_classes=2, model.args.backbone_args.in_channels=3, model.input_size=[3, 4, 16, 16]"),
    ):
        out = [f"experiment.output_root={tmp_path / 'out'}", "train.epochs=1", "data.batch_size=2"]
        proc = main_server.run([*out, *args], ROOT, subprocess_env(), timeout=240)
        assert proc.returncode == 0 and "test: " in proc.stdout, proc.stderr[-3000:]
        assert f": {taken} (saved in the run's config.yaml" in proc.stderr, proc.stderr[-3000:]


def test_a_mask_or_video_folder_on_the_default_classifier_names_a_config_of_its_task(tmp_path, capsys):
    """data.name=image_mask_folder data.root=DIR alone said "give classification data" to a user who has masks;
    the line names a config of the data's task, with the data.args that config's demo data set left out."""
    write_masks_and_videos(tmp_path)
    for task, name, folder, config, args, own in (
        ("sod", "image_mask_folder", "sod", "sod_shapes", "{size: 32}", []),
        (
            "video",
            "video_frames_folder",
            "vid",
            "video_moving_shapes",
            "{clip_len: 6, num_clips: 3}",
            ["data.args={clip_len: 4}"],
        ),
    ):
        argv = [f"data.name={name}", f"data.root={tmp_path / folder}", f"experiment.output_root={tmp_path}", *own]
        assert main.main(argv) == 2
        fix = f'--config configs/{config}.yaml data.name={name} data.root={tmp_path / folder} "data.args={args}"'
        (err,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
        assert err.startswith(f"error: the data holds {task} samples, but eval.metric=classification"), err
        assert f"train it with a config of its task: {fix}, or give classification data" in err, err
        assert (ROOT / "configs" / f"{config}.yaml").is_file() and not list(tmp_path.glob(f"{name}_*/run_*"))


def test_one_score_on_two_classes_names_the_loss_only_where_it_reads_a_score_per_class():
    """With bce_with_logits the line said that loss needed one score per class, which it does not."""
    from utils.data.shape_from_data import check_classes

    for loss, want in (
        ("loss=[{name: cross_entropy}]", ": the loss (cross_entropy) and eval.metric=classification (top-k"),
        ("loss=[{name: bce_with_logits}]", ": eval.metric=classification (top-k, the confusion matrix) read one"),
    ):
        cfg = load_config(None, ["data.name=image_folder", "model.args.num_classes=1", loss])
        with pytest.raises(ConfigError) as err:
            check_classes(cfg, 2, ["cat", "dog"])
        assert want in str(err.value) and str(err.value).endswith("leave it out (the data decides)"), err.value
