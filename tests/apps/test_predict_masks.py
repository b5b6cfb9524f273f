"""--mode predict with a saliency network: masks named after the input tree (no two inputs share a mask
file), inputs sized as the mask datasets size them, and a full disk that leaves no partial mask."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import main
from tests.apps.conftest import make_digit_folder
from tests.apps.test_predict import read_csv
from tests.fixtures.outputs import one_error, partial_files, small_disk
from utils.data.datasets.shapes_sod import main as write_shapes
from utils.data.datasets.shapes_sod import render_scene
from utils.data.predict_inputs import ImageFiles, mask_names


@pytest.fixture(scope="module")
def sod_checkpoint(tmp_path_factory) -> str:
    """The SOD demo's MINet (data.args.size=32) after 2 steps."""
    out = tmp_path_factory.mktemp("sod_predict")
    args = [
        "--config",
        "configs/sod_shapes.yaml",
        f"experiment.output_root={out}",
        "experiment.name=sod",
        "data.args.counts={train: 16, val: 4, test: 4}",
        "train.iterations=2",
    ]
    assert main.main(args) == 0
    return str(out / "sod" / "run_001" / "checkpoints" / "best.pt")


def scene(path: Path, index: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(render_scene(0, "test", index)[0]).save(path)
    return path


def predict(checkpoint: str, spec: Path, out: Path, *extra: str) -> int:
    return main.main(
        ["--mode", "predict", "--checkpoint", checkpoint, "--input", str(spec), "--output", str(out), *extra]
    )


def test_mask_names_mirror_the_tree_and_never_collide():
    paths = [
        Path("in/a/x.jpg"),
        Path("in/a/x.png"),
        Path("in/b/x.png"),
        Path("in/a/y.tif"),
        Path("in/a/x.jpg.png"),
        Path("in/c/Z.PNG"),
        Path("in/c/z.png"),
    ]
    names = mask_names(ImageFiles(paths, Path("in")).keys)
    assert [str(n) for n in names] == [
        "a/x.jpg.1.png",
        "a/x.png",
        "b/x.png",
        "a/y.png",
        "a/x.jpg.png",
        "c/Z.PNG.png",
        "c/z.png",
    ]
    assert len({str(n).casefold() for n in names}) == len(paths)


def test_inputs_sharing_a_stem_get_masks_of_their_own_named_after_the_input_tree(sod_checkpoint, tmp_path, capsys):
    """a/x.png, a/x.jpg and b/x.png all wrote masks/x.png: two of the three masks were lost."""
    root = tmp_path / "in"
    images = [scene(root / "a" / "x.jpg", 0), scene(root / "a" / "x.png", 1), scene(root / "b" / "x.png", 2)]
    assert predict(sod_checkpoint, root, tmp_path / "tree") == 0
    masks = tmp_path / "tree" / "masks"
    expected = [masks / "a" / "x.jpg.png", masks / "a" / "x.png", masks / "b" / "x.png"]
    assert sorted(p for p in masks.rglob("*") if p.is_file()) == sorted(expected)
    rows = read_csv(tmp_path / "tree" / "predictions.csv")
    assert [(r["path"], r["mask"]) for r in rows] == [(str(i), str(m)) for i, m in zip(images, expected)]
    for image, mask in zip(images, expected):
        assert np.asarray(Image.open(mask)).shape == np.asarray(Image.open(image)).shape[:2]  # at the image's own size
    assert predict(sod_checkpoint, images[1], tmp_path / "alone") == 0  # the mask under a/x.png is a/x.png's
    assert (tmp_path / "alone" / "masks" / "x.png").read_bytes() == expected[1].read_bytes()
    # a glob: named below its folder without wildcards
    assert predict(sod_checkpoint, root / "*" / "x.*", tmp_path / "glob") == 0
    assert sorted(p.relative_to(tmp_path / "glob") for p in (tmp_path / "glob" / "masks").rglob("*.png")) == sorted(
        p.relative_to(tmp_path / "tree") for p in expected
    )
    capsys.readouterr()


def test_a_mask_dataset_without_a_size_refuses_inputs_of_another_size_naming_data_args_size(
    sod_checkpoint, tmp_path, capsys
):
    image = scene(tmp_path / "in" / "s.png", 3)
    height, width = np.asarray(Image.open(image)).shape[:2]
    assert predict(sod_checkpoint, image, tmp_path / "out", "data.args.size=null") == 2
    error = one_error(capsys)
    assert (
        f"reaches the network at {width}x{height}" in error
        and "trained at 32x32" in error
        and error.endswith("let predict resize them: data.args.size=32")
    ), error
    assert not (tmp_path / "out" / "masks").exists()


def test_a_full_disk_while_writing_masks_is_one_line_with_predicts_advice_and_no_partial_mask(
    sod_checkpoint, tmp_path, capsys
):
    for i in range(24):
        scene(tmp_path / "in" / f"{i:02d}.png", i)
    with small_disk(tmp_path / "disk", "48k") as disk:
        assert predict(sod_checkpoint, tmp_path / "in", disk / "out") == 2
        error = one_error(capsys)
        assert "could not write '" in error and "/masks/" in error and "(No space left on device)" in error, error
        assert "--resume" not in error and "run the predict again" in error, error
        assert partial_files(disk) == [] and not (disk / "out" / "predictions.csv").exists()
        assert 0 < len(list((disk / "out" / "masks").glob("*.png"))) < 24


def test_a_packed_copy_of_mask_folders_tests_and_predicts_as_the_folders(sod_checkpoint, tmp_path, capsys):
    """The same checkpoint on mask folders and on their packed copy: the same test line, masks and rows."""
    write_shapes(["--out", str(tmp_path / "sod"), "--split", "train", "test", "--count", "4"])
    folders = ["data.name=image_mask_folder", f"data.root={tmp_path / 'sod'}", "data.args={size: 32}"]
    packed = tmp_path / "packed"
    assert main.main(["--mode", "pack", "--output", str(packed), *folders]) == 0
    lines = []
    for source in (folders, ["data.name=shards", f"data.root={packed}", "data.args={size: 32}"]):
        capsys.readouterr()
        assert main.main(["--mode", "test", "--checkpoint", sod_checkpoint, *source]) == 0
        lines.append(next(line for line in capsys.readouterr().out.splitlines() if line.startswith("test:")))
    assert lines[0] == lines[1] and "mae=" in lines[0]

    assert predict(sod_checkpoint, tmp_path / "sod" / "test" / "Image", tmp_path / "from_files") == 0
    assert predict(sod_checkpoint, packed / "test", tmp_path / "from_shards") == 0
    files = read_csv(tmp_path / "from_files" / "predictions.csv")
    shards = read_csv(tmp_path / "from_shards" / "predictions.csv")
    assert [r["path"] for r in shards] == [f"{packed / 'test'}:{Path(r['path']).name}" for r in files]
    assert [r["mean_saliency"] for r in shards] == [r["mean_saliency"] for r in files]
    for row in files:  # masks named by the sample keys, as the files' masks are named below their folder
        name = Path(row["path"]).with_suffix(".png").name
        own = (tmp_path / "from_shards" / "masks" / name).read_bytes()
        assert own == (tmp_path / "from_files" / "masks" / name).read_bytes()

    assert predict(sod_checkpoint, packed / "test" / "index.json", tmp_path / "index") == 2
    assert f"is a file of a packed split; name the split's folder: --input {packed / 'test'}" in one_error(capsys)
    assert predict(sod_checkpoint, packed, tmp_path / "root") == 2  # the packed root, not a split
    assert f"holds the packed splits ['test', 'train']; name one: --input {packed / 'test'}" in one_error(capsys)
    digits = tmp_path / "digits_packed"
    digit_args = ["data.name=image_folder", f"data.root={make_digit_folder(tmp_path / 'digits')}"]
    assert main.main(["--mode", "pack", "--output", str(digits), *digit_args]) == 0
    assert predict(sod_checkpoint, digits / "test", tmp_path / "other") == 2
    assert "holds packed classification data, but the checkpoint's network is for eval.metric=sod" in one_error(capsys)
    other_task = ["data.name=shards", f"data.root={digits}", "data.args={size: 32}"]
    assert main.main(["--mode", "test", "--checkpoint", sod_checkpoint, *other_task]) == 2
    assert "the data holds classification samples, but eval.metric=sod" in one_error(capsys)
