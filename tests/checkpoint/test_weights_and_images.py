"""Files read at the edges of the process, weights and images: timm never loads a file itself; images open only
as the raster formats the framework reads, whatever their name; a folder given as pretrained weights is named
so, and the weights log line says what loaded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import EpsImagePlugin, Image

import main
from tests.conftest import fast_overrides
from tests.fixtures.crafted import errors_of
from utils.data.bad_samples import BadFile
from utils.data.images import open_image, read_pixels
from utils.data.mask_encoding import read_mask
from utils.registry import BACKBONES

# -- F5: timm loads no file itself; images open only as the formats read ------------------------------------------


@pytest.mark.parametrize(
    "argument", ["checkpoint_path: /tmp/w.pth", "cache_dir: /tmp/hub", "pretrained_cfg_overlay: {file: /tmp/w.pth}"]
)
def test_timm_arguments_that_load_or_fetch_a_file_are_refused(argument, tmp_path, capsys):
    """timm.create_model(checkpoint_path=...) read the file with timm's own torch.load, past the safe loader."""
    args = [
        *fast_overrides(tmp_path, "timm", epochs=1)[:3],
        "model.args.backbone=timm",
        f"model.args.backbone_args={{model_name: resnet18, {argument}}}",
    ]
    assert main.main(args) == 2
    (line,) = errors_of(capsys)
    name = argument.split(":")[0]
    assert line.startswith(f"error: backbone timm: {name} ") and line.endswith(
        "as the backbone's pretrained (model.args.backbone_args.pretrained=FILE.pth)"
    )
    assert not (tmp_path / "timm").exists()


EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n%%EndComments\n0 0 moveto\nshowpage\n%%EOF\n"


def test_an_image_of_another_format_is_unreadable_whatever_its_name(tmp_path, monkeypatch):
    """An EPS file named a.png opened as EPS, and PIL ran Ghostscript on it where it is installed."""
    ran = []
    monkeypatch.setattr(
        EpsImagePlugin.EpsImageFile,
        "load",
        lambda self, *a, **k: ran.append(self) or (_ for _ in ()).throw(OSError("ghostscript")),
    )
    (tmp_path / "a.png").write_bytes(EPS)
    assert Image.open(tmp_path / "a.png").format == "EPS"  # what PIL itself would make of it
    Image.new("L", (4, 4)).save(tmp_path / "b.png", format="GIF")
    for name, kind in (("a.png", "image"), ("b.png", "image")):
        with pytest.raises(BadFile, match=rf"cannot read {kind} '.*{name}' \(UnidentifiedImageError\)"):
            open_image(tmp_path / name, kind)
    with pytest.raises(BadFile, match=r"cannot read mask '.*a.png' \(UnidentifiedImageError\)"):
        read_mask(tmp_path / "a.png")
    assert ran == []


@pytest.mark.parametrize(
    "name, pil_format",
    [
        ("a.png", "PNG"),
        ("a.jpg", "JPEG"),
        ("a.bmp", "BMP"),
        ("a.ppm", "PPM"),
        ("a.pgm", "PPM"),
        ("a.tif", "TIFF"),
        ("a.webp", "WEBP"),
    ],
)
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
    assert errors_of(capsys) == [
        f"error: pretrained weights '{run}' is a folder; give a checkpoint or weights file (.pt, .pth, .safetensors) or "
        f"a sharded checkpoint's *.dcp directory, e.g. {run / 'checkpoints' / 'best.pt'}"
    ]


def test_the_weights_line_names_the_backbone_s_own_pretrained_file(tmp_path):
    weights = tmp_path / "backbone.pth"
    torch.save(BACKBONES.build("small_cnn", in_channels=1, widths=[8, 16]).state_dict(), weights)
    args = [
        *fast_overrides(tmp_path, "b", epochs=1)[:3],
        f"model.args.backbone_args={{widths: [8, 16], pretrained: {weights}}}",
        "train.iterations=2",
        "threads=1",
    ]
    assert main.main(args) == 0
    log = (tmp_path / "b" / "run_001" / "log.txt").read_text()
    assert (
        f"weights: the network's initialisation, with the backbone's pretrained file {weights} loaded by the backbone"
        in log
    )
    assert "the network's own initialisation" not in log
