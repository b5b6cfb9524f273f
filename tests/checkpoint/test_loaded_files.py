"""Files read at the edges of the process: ``convert`` writes only a new file outside every run and outside its
source; a loaded config (YAML, override, checkpoint) is a plain tree of bounded size; ``--trust-file`` covers one
file or one sharded checkpoint directory; timm never loads a file itself; images open only as the raster formats
the framework reads; a folder given as pretrained weights is named so, and the weights log line says what loaded."""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

import numpy as np
import pytest
import torch
from PIL import EpsImagePlugin, Image

import main
from tests.conftest import fast_overrides
from utils.checkpoint import convert
from utils.checkpoint.safe_load import is_trusted, trust_files
from utils.checkpoint.sharded import ShardedCheckpointStore
from utils.checkpoint.state import Checkpoint
from utils.data.bad_samples import BadFile
from utils.data.images import open_image, read_pixels
from utils.data.mask_encoding import read_mask
from utils.errors import CheckpointError
from utils.plain_tree import tree_problem
from utils.registry import BACKBONES
from utils.typed_merge import load_yaml

SMALL = "model.args.backbone_args={widths: [8, 16]}"


class RunsCommand:
    """An entry whose unpickling runs a shell command (what a crafted checkpoint carries)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def errors_of(capsys) -> List[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    return [line for line in err.splitlines() if line.startswith("error:")]


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (what a 2^40-node config did)."""
    def stop(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def checkpoint_data(**entries) -> dict:
    """A small checkpoint of the current format (a linear layer's weights) with ``entries`` set."""
    return {"format": 3, "progress": {"epoch": 0, "batch": 1, "step": 1}, "config": {}, "model": torch.nn.Linear(3, 2).state_dict(), **entries}


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A sharded checkpoint directory (convert's source), in a folder that is no run."""
    optimizer = {"state": {}, "param_groups": [{"lr": 0.1, "params": ["weight", "bias"]}]}
    return ShardedCheckpointStore(tmp_path_factory.mktemp("store")).save(checkpoint_data(optimizer=optimizer), 0, 1)


# -- F1: convert never overwrites, never writes into a run or into its source -------------------------------------

def test_convert_refuses_a_target_that_exists_or_lies_in_a_run_or_in_the_source(source, tmp_path, capsys):
    """It replaced another run's best.pt (no longer a hard link), or a file of the source (which then failed its checksum)."""
    run = tmp_path / "exp" / "run_001" / "checkpoints"
    run.mkdir(parents=True)
    (run / "epoch0000_batch000001.pt").write_bytes(b"the run's own")
    os.link(run / "epoch0000_batch000001.pt", run / "best.pt")
    (tmp_path / "taken.pt.sha256").write_text("0" * 64)
    cases = {
        run / "best.pt": f"target '{run / 'best.pt'}' exists; convert never overwrites a file",
        tmp_path / "taken.pt": f"target '{tmp_path / 'taken.pt.sha256'}' exists",
        source / "state.pt": f"target '{source / 'state.pt'}' exists",
        source / "new.pt": f"target '{source / 'new.pt'}' lies inside the source '{source}'",
        run / "new.safetensors": f"target '{run / 'new.safetensors'}' lies inside the run folder '{run.parent}'",
        tmp_path / "no" / "such" / "x.pt": f"the folder of target '{tmp_path / 'no' / 'such' / 'x.pt'}' does not exist; create it first",
    }
    sums = (source / "SHA256SUMS").read_bytes()
    for target, expected in cases.items():
        assert convert.main([str(source), str(target)]) == 2
        (line,) = errors_of(capsys)
        assert line.startswith(f"error: {expected}"), line
    assert (run / "best.pt").read_bytes() == b"the run's own" and os.stat(run / "best.pt").st_nlink == 2
    assert not (run / "new.safetensors").exists() and not (source / "new.pt").exists() and (source / "SHA256SUMS").read_bytes() == sums
    assert not (tmp_path / "no").exists()


# -- F2: a loaded config is a plain tree --------------------------------------------------------------------------

def shared_tree(levels: int = 40) -> list:
    """``x = [x, x]`` ``levels`` times: a few bytes pickled, 2^levels nodes walked."""
    tree: list = ["a"]
    for _ in range(levels):
        tree = [tree, tree]
    return tree


def test_a_checkpoint_whose_config_expands_to_2_to_the_40_nodes_is_refused_at_once(tmp_path, capsys):
    file = tmp_path / "crafted.pt"
    torch.save(checkpoint_data(config={"data": {"args": {"classes": shared_tree()}}}), file)
    assert file.stat().st_size < 200_000
    with within(60):
        assert main.main(["--mode", "test", "--checkpoint", str(file)]) == 2
    (line,) = errors_of(capsys)
    assert line.startswith(f"error: checkpoint '{file}' entry 'config' is a dict that holds more than 1,000,000 values written out")
    assert line.endswith("the file is damaged or not a checkpoint of this framework")
    with pytest.raises(CheckpointError, match="entry 'classes' is a list that contains itself"):
        looped: list = ["a"]
        looped.append(looped)
        Checkpoint(checkpoint_data(classes=looped))


@pytest.mark.parametrize("yaml_text, expected", [
    ("hooks: &a [*a]\n", "the YAML contains itself at 'hooks[0]' (a cycle: it refers to 'hooks', which holds it)"),
    ("data:\n  args: {a: &x [1, 2], b: *x}\nhooks: &h [*h]\n", "the YAML contains itself at 'hooks[0]'"),
    ("data:\n  args: {a: " + "[" * 3000 + "]" * 3000 + "}\n", "the YAML nests collections too deeply to read"),
])
def test_a_yaml_config_that_is_no_plain_tree_is_one_error_line(yaml_text, expected, tmp_path, capsys):
    """A self-reference was a raw RecursionError in the check for glued keys."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text)
    assert main.main(["--config", str(path)]) == 2
    (line,) = errors_of(capsys)
    assert line.startswith(f"error: config file '{path}': {expected}"), line
    assert main.main(["data.args={a: &x [*x]}"]) == 2 and "contains itself at 'a[0]'" in errors_of(capsys)[0]  # an override too


def test_yaml_anchors_share_values_and_each_place_is_its_own_after_loading():
    """A merge key (``<<: *base``) and an alias are ordinary YAML; the loaded config shares no container."""
    data = load_yaml("base: &b {lr: 1, sizes: [1, 2]}\nexp:\n  <<: *b\n  lr: 2\nalso: *b\n")
    assert data == {"base": {"lr": 1, "sizes": [1, 2]}, "exp": {"lr": 2, "sizes": [1, 2]}, "also": {"lr": 1, "sizes": [1, 2]}}
    data["exp"]["sizes"].append(3)
    assert data["base"]["sizes"] == [1, 2] and data["also"] is not data["base"]


def test_the_tree_check_bounds_size_and_depth_without_recursing():
    assert tree_problem({"a": [1, 2, {"b": "c"}], "d": (), "e": ()}) is None  # () is one shared object: harmless
    assert tree_problem(list(range(11)), max_nodes=10).startswith("holds more than 10 values written out")
    assert tree_problem(shared_tree(3)) is None and tree_problem(shared_tree(4), max_nodes=20).startswith("holds more than 20 values")
    deep: list = []
    for _ in range(5000):
        deep = [deep, 1]
    assert tree_problem(deep).startswith("is nested more than 100 levels deep at '[0][0]")


# -- F4: --trust-file trusts one file or one sharded checkpoint directory -----------------------------------------

def test_trust_file_of_an_ordinary_folder_or_a_missing_path_is_refused(source, tmp_path, capsys):
    """--trust-file DIR trusted every file directly in any folder."""
    marker = tmp_path / "MARKER"
    folder = tmp_path / "downloads"
    folder.mkdir()
    torch.save(checkpoint_data(hooks={"x": RunsCommand(marker)}), folder / "crafted.pt")
    assert main.main(["--mode", "test", "--checkpoint", str(folder / "crafted.pt"), "--trust-file", str(folder)]) == 2
    assert errors_of(capsys) == [f"error: --trust-file '{folder}' is a folder, not a sharded checkpoint directory (no .metadata), and trust covers "
                                 "no other folder's files; name the file to trust itself"]
    assert not marker.exists()
    missing = tmp_path / "nowhere.pt"
    assert main.main(["--mode", "test", "--checkpoint", str(folder / "crafted.pt"), "--trust-file", str(missing)]) == 2
    assert errors_of(capsys)[0].startswith(f"error: --trust-file '{missing}' does not exist; name the checkpoint or weights file to trust")
    assert convert.main([str(source), str(tmp_path / "c.pt"), "--trust-file", str(missing)]) == 2 and len(errors_of(capsys)) == 1
    try:
        trust_files([source])  # a sharded checkpoint directory covers the files directly in it
        assert is_trusted(source) and is_trusted(source / ".metadata") and not is_trusted(source.parent / "other.pt")
    finally:
        trust_files([])


# -- F5: timm loads no file itself; images open only as the formats read ------------------------------------------

@pytest.mark.parametrize("argument", ["checkpoint_path: /tmp/w.pth", "cache_dir: /tmp/hub", "pretrained_cfg_overlay: {file: /tmp/w.pth}"])
def test_timm_arguments_that_load_or_fetch_a_file_are_refused(argument, tmp_path, capsys):
    """timm.create_model(checkpoint_path=...) read the file with timm's own torch.load, past the safe loader."""
    args = [*fast_overrides(tmp_path, "timm", epochs=1)[:3], "model.args.backbone=timm", f"model.args.backbone_args={{model_name: resnet18, {argument}}}"]
    assert main.main(args) == 2
    (line,) = errors_of(capsys)
    name = argument.split(":")[0]
    assert line.startswith(f"error: backbone timm: {name} ") and line.endswith("as the backbone's pretrained (model.args.backbone_args.pretrained=FILE.pth)")
    assert not (tmp_path / "timm").exists()


EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n%%EndComments\n0 0 moveto\nshowpage\n%%EOF\n"


def test_an_image_of_another_format_is_unreadable_whatever_its_name(tmp_path, monkeypatch):
    """An EPS file named a.png opened as EPS, and PIL ran Ghostscript on it where it is installed."""
    ran = []
    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "load", lambda self, *a, **k: ran.append(self) or (_ for _ in ()).throw(OSError("ghostscript")))
    (tmp_path / "a.png").write_bytes(EPS)
    assert Image.open(tmp_path / "a.png").format == "EPS"  # what PIL itself would make of it
    Image.new("L", (4, 4)).save(tmp_path / "b.png", format="GIF")
    for name, kind in (("a.png", "image"), ("b.png", "image")):
        with pytest.raises(BadFile, match=rf"cannot read {kind} '.*{name}' \(UnidentifiedImageError\)"):
            open_image(tmp_path / name, kind)
    with pytest.raises(BadFile, match=r"cannot read mask '.*a.png' \(UnidentifiedImageError\)"):
        read_mask(tmp_path / "a.png")
    assert ran == []


@pytest.mark.parametrize("name, pil_format", [("a.png", "PNG"), ("a.jpg", "JPEG"), ("a.bmp", "BMP"), ("a.ppm", "PPM"), ("a.pgm", "PPM"),
                                              ("a.tif", "TIFF"), ("a.webp", "WEBP")])
def test_every_extension_the_datasets_list_still_opens(name, pil_format, tmp_path):
    mode = "L" if name.endswith(".pgm") else "RGB"
    Image.fromarray(np.full((4, 5, 3), 200, dtype=np.uint8)).convert(mode).save(tmp_path / name, format=pil_format)
    assert tuple(read_pixels(tmp_path / name, 3).shape) == (3, 4, 5)


# -- F13: a folder as pretrained weights, and the weights log line ------------------------------------------------

def test_a_folder_given_as_pretrained_weights_is_named_a_folder(tmp_path, capsys):
    run = tmp_path / "old" / "run_001"
    (run / "checkpoints").mkdir(parents=True)
    torch.save({}, run / "checkpoints" / "best.pt")
    assert main.main([*fast_overrides(tmp_path / "out", "p", epochs=1), f"model.pretrained={run}"]) == 2
    assert errors_of(capsys) == [f"error: pretrained weights '{run}' is a folder; give a checkpoint or weights file (.pt, .pth, .safetensors) or "
                                 f"a sharded checkpoint's *.dcp directory, e.g. {run / 'checkpoints' / 'best.pt'}"]


def test_the_weights_line_names_the_backbone_s_own_pretrained_file(tmp_path):
    weights = tmp_path / "backbone.pth"
    torch.save(BACKBONES.build("small_cnn", in_channels=1, widths=[8, 16]).state_dict(), weights)
    args = [*fast_overrides(tmp_path, "b", epochs=1)[:3], f"model.args.backbone_args={{widths: [8, 16], pretrained: {weights}}}", "train.iterations=2", "threads=1"]
    assert main.main(args) == 0
    log = (tmp_path / "b" / "run_001" / "log.txt").read_text()
    assert f"weights: the network's initialisation, with the backbone's pretrained file {weights} loaded by the backbone" in log
    assert "the network's own initialisation" not in log
