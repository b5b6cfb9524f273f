"""Input trees with symbolic links: each real directory is walked once (predict's folders and globs,
predict_videos and the image_folder dataset share ``walk_visible``), so a link back up the tree
neither hangs predict nor repeats an input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import main
from tests.apps.conftest import CLASSES
from tests.apps.test_predict import read_csv
from utils.data.folders import glob_visible, walk_visible
from utils.data.predict_inputs import collect_inputs
from utils.data.predict_videos import collect_videos


def copy_images(source: Path, target: Path, count: int) -> list:
    target.mkdir(parents=True, exist_ok=True)
    names = []
    for image in sorted(source.glob("*.png"))[:count]:
        (target / image.name).write_bytes(image.read_bytes())
        names.append(target / image.name)
    return names


@pytest.fixture
def looped(trained, tmp_path) -> dict:
    """``tree/a/*.png`` (3), ``tree/b/*.png`` (2); ``a/up -> ..`` and ``b/again -> ../a``: the link back up
    and a second path to ``a``."""
    tree = tmp_path / "tree"
    images = copy_images(trained["data"] / "val" / CLASSES[0], tree / "a", 3) + copy_images(
        trained["data"] / "val" / CLASSES[1], tree / "b", 2
    )
    os.symlink("..", tree / "a" / "up")
    os.symlink("../a", tree / "b" / "again")
    return {"tree": tree, "images": sorted(images)}


@pytest.mark.timeout(60)
def test_walk_and_glob_visit_each_real_directory_once(looped):
    tree = looped["tree"]
    walked = [Path(d) for d, _, _ in walk_visible(tree)]
    assert walked == [tree, tree / "a", tree / "b"]  # neither a/up (the tree) nor b/again (a) is entered
    assert collect_inputs(str(tree)) == looped["images"]
    # glob.glob's ** gives each image 41 times here
    assert collect_inputs(str(tree / "**" / "*.png")) == looped["images"]
    assert glob_visible(str(tree / "*" / "*.png")) == looped["images"]
    assert glob_visible(str(tree / "*")) == [tree / "a", tree / "b"]


@pytest.mark.timeout(60)
def test_a_fifo_or_a_device_in_a_data_folder_is_no_sample(tmp_path):
    """Opening either never ends (a FIFO blocks, /dev/zero has no end); a broken link stays, for its reader to name."""
    (tmp_path / "a.png").write_bytes(b"png")
    os.mkfifo(tmp_path / "fifo.png")
    os.symlink("/dev/zero", tmp_path / "zero.png")
    os.symlink(tmp_path / "fifo.png", tmp_path / "to_fifo.png")
    os.symlink(tmp_path / "gone.png", tmp_path / "broken.png")
    assert collect_inputs(str(tmp_path)) == [tmp_path / "a.png", tmp_path / "broken.png"]
    assert [f for _, _, files in walk_visible(tmp_path) for f in sorted(files)] == ["a.png", "broken.png"]


@pytest.mark.timeout(60)
def test_frame_folders_behind_a_loop_are_found_once(tmp_path):
    for video in ("v1", "v2"):
        (tmp_path / "videos" / "c" / video).mkdir(parents=True)
        (tmp_path / "videos" / "c" / video / "00001.png").write_bytes(b"")  # listed, not read
    os.symlink("../..", tmp_path / "videos" / "c" / "v1" / "up")
    os.symlink("..", tmp_path / "videos" / "c" / "v2" / "parent")
    expected = [tmp_path / "videos" / "c" / "v1", tmp_path / "videos" / "c" / "v2"]
    assert collect_videos(str(tmp_path / "videos")) == expected
    assert collect_videos(str(tmp_path / "videos" / "**" / "v*")) == expected


@pytest.mark.timeout(60)
def test_image_folder_class_with_a_link_back_up_reads_each_image_once(trained, tmp_path):
    from utils.data.datasets.image_folder import ImageFolder

    for split in ("train", "val"):
        copy_images(trained["data"] / "val" / CLASSES[0], tmp_path / "imgs" / split / "a", 3)
        os.symlink("..", tmp_path / "imgs" / split / "a" / "loop")
    assert len(ImageFolder("train", str(tmp_path / "imgs"), channels=1)) == 3


@pytest.mark.timeout(120)
def test_predict_on_a_tree_with_links_back_up_predicts_each_image_once(trained, looped, tmp_path, capsys):
    """Two links hung predict (a walk without end); one predicted each image 41 times."""
    args = ["--mode", "predict", "--checkpoint", str(trained["checkpoint"])]
    assert main.main([*args, "--input", str(looped["tree"]), "--output", str(tmp_path / "folder")]) == 0
    assert [Path(r["path"]) for r in read_csv(tmp_path / "folder" / "predictions.csv")] == looped["images"]
    assert main.main([*args, "--input", str(looped["tree"] / "**" / "*.png"), "--output", str(tmp_path / "glob")]) == 0
    assert [Path(r["path"]) for r in read_csv(tmp_path / "glob" / "predictions.csv")] == looped["images"]
    assert "predict: inputs=5 predicted=5" in capsys.readouterr().out
