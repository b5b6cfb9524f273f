"""What loads, and what is checked as it loads: our checkpoints of every format, torchvision/timm state dicts,
``.safetensors`` files and DCP directories (loaded and converted); a half-written sharded checkpoint, its
SHA256SUMS line by line, a checkpoint's structure, and pretrained weights that fill too little of the model.

(The checkpoints they load are trained once for the package: tests/checkpoint/conftest.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import main
from tests.conftest import fast_overrides
from tests.fixtures.crafted import errors_of
from utils.checkpoint import convert
from utils.checkpoint.readers import load_file
from utils.checkpoint.rng import capture_rng, restore_rng
from utils.checkpoint.safetensors_io import read_safetensors
from utils.checkpoint.sharded import SUMS, read_state
from utils.checkpoint.state import Checkpoint
from utils.checkpoint.weights import load_weights
from utils.errors import CheckpointError
from utils.registry import BACKBONES, NETWORKS


def test_checkpoints_of_every_format_load_with_numpy_s_state_as_a_tensor_or_an_old_ndarray(best, tmp_path):
    # a fresh one needs no global beyond torch's
    assert torch.serialization.get_unsafe_globals_in_checkpoint(best) == []
    numpy_state = load_file(best)["rng"][0]["numpy"]
    assert numpy_state[0] == "MT19937" and isinstance(numpy_state[1], torch.Tensor)
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    # as framework 0.3 and older captured it: numpy's key as an ndarray
    rng = {
        **capture_rng(),
        "numpy": np.random.get_state(),
    }
    format_1 = {
        "model": model.state_dict(),
        "ema": None,
        "optimizer": {},
        "scheduler": {},
        "amp": {},
        "epoch": 2,
        "batch": 6,
        "global_step": 30,
        "best": {"metric": "top1", "value": 0.9, "epoch": 1, "evals_since_best": 0},
        "nonfinite": {"consecutive": 0, "total": 0},
        "sampler": {"epoch": 2, "batches_done": 6},
        "rng": [rng],
        "world_size": 1,
        "config": {"model": {"name": "classifier"}},
        "version": "0.1.0",
    }
    format_2 = {
        "format": 2,
        "framework": "0.2.0",
        "config": {},
        "world_size": 1,
        "progress": {"epoch": 1, "batch": 0, "step": 9},
        "model": model.state_dict(),
        "ema": None,
        "optimizer": {},
        "scheduler": {},
        "amp": {},
        "rng": [rng],
        "sampler": {"epoch": 1, "seed": 0},
        "hooks": {
            "validation": {"metric": "top1", "value": 0.8, "epoch": 0, "evals_since_best": 0},
            "checkpoint": {"best": "epoch0001_batch000000.pt"},
        },
    }
    for name, data in (("f1.pt", format_1), ("f2.pt", format_2)):
        torch.save(data, tmp_path / name)
        checkpoint = Checkpoint.load(tmp_path / name)
        assert torch.equal(checkpoint.model_weights["head.2.weight"], model.state_dict()["head.2.weight"])
        np.random.seed(1)
        restore_rng(load_file(tmp_path / name)["rng"][0])  # the ndarray form restores as before
        assert np.array_equal(np.random.get_state()[1], rng["numpy"][1])
    assert Checkpoint.load(tmp_path / "f1.pt").progress.step == 30 and Checkpoint.load(tmp_path / "f2.pt").loop_state(
        "checkpointer"
    )


def test_torchvision_and_timm_state_dicts_and_safetensors_files_load(tmp_path, capsys):
    import timm
    import torchvision

    torch.save(torchvision.models.resnet18().state_dict(), tmp_path / "resnet18-tv.pth")
    torch.save(
        torchvision.models.resnet18().state_dict(), tmp_path / "legacy.pth", _use_new_zipfile_serialization=False
    )
    for name in ("resnet18-tv.pth", "legacy.pth"):
        assert len(BACKBONES.build("resnet18", pretrained=str(tmp_path / name)).state_dict()) > 100
    source = timm.create_model("resnet18", pretrained=False, in_chans=1)
    torch.save(source.state_dict(), tmp_path / "resnet18.pth")
    save_file(source.state_dict(), tmp_path / "resnet18.safetensors")
    for name in ("resnet18.pth", "resnet18.safetensors"):
        own = BACKBONES.build("timm", model_name="resnet18", in_chans=1, pretrained=str(tmp_path / name))
        assert torch.equal(own.model.layer4[1].conv2.weight, source.layer4[1].conv2.weight)
    source = NETWORKS.build("classifier", num_classes=3, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    save_file(source.state_dict(), tmp_path / "w.safetensors")
    args, _ = (
        [
            *fast_overrides(tmp_path / "out", "st", epochs=1),
            "train.iterations=1",
            f"model.pretrained={tmp_path / 'w.safetensors'}",
        ],
        capsys.readouterr(),
    )
    assert main.main(args) == 0  # as model.pretrained (the logging above went to an earlier test's console handler)
    (tmp_path / "bad.safetensors").write_bytes(b"\x00" * 16)
    assert main.main([*args, f"model.pretrained={tmp_path / 'bad.safetensors'}"]) == 2
    assert "is corrupt or not a safetensors file" in errors_of(capsys)[0]


def test_a_sharded_checkpoint_loads_converts_to_safetensors_and_to_one_file(sharded, tmp_path, capsys):
    assert main.main(["--mode", "test", "--checkpoint", str(sharded)]) == 0
    assert convert.main([str(sharded), str(tmp_path / "w.safetensors")]) == 0
    assert convert.main([str(sharded), str(tmp_path / "c.pt")]) == 0
    checkpoint = Checkpoint.load(sharded)
    weights = read_safetensors(tmp_path / "w.safetensors")
    assert weights.keys() == checkpoint.eval_weights.keys() and all(
        torch.equal(v, checkpoint.eval_weights[k]) for k, v in weights.items()
    )
    # a byte entry, read weights-only
    assert (
        Checkpoint.load(tmp_path / "c.pt").optimizer_state()["param_groups"][0]["lr"]
        == checkpoint.optimizer_state()["param_groups"][0]["lr"]
    )
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    assert len(load_weights(model, tmp_path / "w.safetensors").loaded) == len(model.state_dict())


def test_a_half_written_sharded_checkpoint_is_named_so(sharded, tmp_path, capsys):
    directory = Path(shutil.copytree(sharded, tmp_path / "epoch0000_batch000002.dcp"))
    (directory / ".metadata").unlink()
    assert (
        main.main(["--mode", "test", "--checkpoint", str(directory)]) == 2
        and "no .metadata: it is half-written" in errors_of(capsys)[0]
    )
    assert convert.main([str(directory), str(tmp_path / "c.pt")]) == 2 and "half-written" in errors_of(capsys)[0]
    assert (
        main.main([*fast_overrides(tmp_path / "out", "x", epochs=1), "--resume", str(directory)]) == 2
        and "half-written" in errors_of(capsys)[0]
    )
    assert not (directory / ".lock").exists()


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda d: (d / SUMS).write_text(""), "SHA256SUMS is empty"),
        (
            lambda d: (d / SUMS).write_text((d / SUMS).read_text() + "not a digest line\n"),
            "SHA256SUMS line 5 is not '<sha256>  <file name>'",
        ),
        (
            lambda d: (d / SUMS).write_text((d / SUMS).read_text() + f"{'0' * 64}  ../state.pt\n"),
            "SHA256SUMS line 5 names '../state.pt', not a file of the directory",
        ),
        (
            lambda d: (d / SUMS).write_text((d / SUMS).read_text() + f"{'0' * 64}  ..\n"),
            "SHA256SUMS line 5 names '..', not a file of the directory",
        ),
        (
            lambda d: (d / "extra.distcp").write_bytes(b"x"),
            "'extra.distcp' is in the directory but not listed in SHA256SUMS",
        ),
        (lambda d: (d / SUMS).write_bytes(b"\xff\xfe"), "SHA256SUMS is not text"),
    ],
)
def test_sha256sums_is_read_line_by_line(damage, problem, sharded, tmp_path):
    directory = Path(shutil.copytree(sharded, tmp_path / "c.dcp"))
    assert len((directory / SUMS).read_text().splitlines()) == 4  # every file but SHA256SUMS itself
    damage(directory)
    with pytest.raises(CheckpointError) as err:
        read_state(directory)
    assert problem in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("progress"), "has no 'progress' entry"),
        (lambda d: d.update(config=["not", "a", "mapping"]), "entry 'config' is a list, expected a mapping"),
        (
            lambda d: d.update(progress={"epoch": "two", "batch": 0, "step": 0}),
            "entry 'progress' is a mapping whose 'epoch' is 'two'",
        ),
        (lambda d: d["model"].update(extra=[1, 2]), "entry 'model' is a mapping whose 'extra' is a list"),
        (
            lambda d: d.update(ema={"weights": {"w": 1}, "updates": 3}),
            "entry 'ema' is a mapping whose 'weights' is a mapping whose 'w' is an int",
        ),
        (lambda d: d.update(world_size=0), "entry 'world_size' is 0, expected a number of processes >= 1"),
        (lambda d: d.update(hooks=[1]), "entry 'hooks' is a list"),
    ],
)
def test_a_checkpoint_s_structure_is_checked_when_it_is_read(change, message, best, tmp_path, capsys):
    data = load_file(best)
    change(data)
    torch.save(data, tmp_path / "c.pt")
    assert main.main(["--mode", "test", "--checkpoint", str(tmp_path / "c.pt")]) == 2
    errors = errors_of(capsys)
    assert len(errors) == 1 and message in errors[0] and "damaged or not a checkpoint of this framework" in errors[0], (
        errors
    )


def test_pretrained_weights_that_fill_less_than_half_of_the_model_are_refused(tmp_path, capsys):
    other = NETWORKS.build("classifier", num_classes=3, backbone="small_cnn", backbone_args={"widths": [8, 32]})
    torch.save(other.state_dict(), tmp_path / "other.pt")  # only the first stage fits: 10 of 22 float tensors
    args = [
        *fast_overrides(tmp_path / "out", "share", epochs=1),
        "train.iterations=1",
        f"model.pretrained={tmp_path / 'other.pt'}",
    ]
    assert main.main(args) == 2
    line = errors_of(capsys)[0]
    assert (
        "fills only 10 of the model's 22 floating-point tensors (45%; 0 missing, 12 of another shape)" in line
        and "model.pretrained_min_share" in line
    )
    assert main.main([*args, "model.pretrained_min_share=0.4"]) == 0


def test_a_rank_that_did_not_choose_a_sharded_checkpoint_hashes_none_of_its_shards(sharded, monkeypatch):
    """Rank 0 checks every shard against SHA256SUMS as it chooses the checkpoint (latest_usable); every other rank
    hashed all of them again."""
    from utils.checkpoint import sharded as sharded_module
    from utils.checkpoint.start_point import Chosen, start_point

    hashed = []
    digest = sharded_module.file_digest
    monkeypatch.setattr(sharded_module, "file_digest", lambda path: hashed.append(path) or digest(path))
    assert sharded_module.verify_dir(sharded) is None and len(hashed) >= 2  # rank 0's check: every shard
    hashed.clear()
    start = start_point(Chosen(sharded), lambda checkpoint: True)  # what another rank gets from rank 0
    assert hashed == [] and start.progress.step >= 1
