"""Loading never runs code: a file that asks for more than our checkpoints hold is refused on every path that reads one
(its code never runs); our checkpoints of every format, torchvision/timm state dicts, ``.safetensors`` and DCP directories
load; ``--trust-file`` trusts one file. Also: checkpoint structure, pretrained share, SHA256SUMS, --resume into no run."""

from __future__ import annotations

import datetime
import os
import pathlib
import pickle
import shutil
import subprocess
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import main
from tests.conftest import fast_overrides
from utils.checkpoint import convert
from utils.checkpoint.files import file_digest, load_file
from utils.checkpoint.rng import capture_rng, restore_rng
from utils.checkpoint.safe_load import UnsafeFileError
from utils.checkpoint.safetensors_io import read_safetensors
from utils.checkpoint.sharded import SUMS, ShardedCheckpointStore, read_state
from utils.checkpoint.state import Checkpoint
from utils.checkpoint.sums import sums_text
from utils.checkpoint.weights import MinShare, load_weights
from utils.errors import CheckpointError
from utils.registry import BACKBONES, NETWORKS


class RunsCommand:
    """An entry whose unpickling runs a shell command (what a crafted checkpoint carries)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class TouchesFile(RunsCommand):
    """An entry whose unpickling calls a pathlib method (a global that is an attribute of an allowed class)."""

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def errors_of(capsys) -> List[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    return [line for line in err.splitlines() if line.startswith("error:")]


def refused(capsys, code: int, asked: str = "posix.system") -> str:
    """The one error line of a refused load: exit 2, it names what the file asked for and --trust-file."""
    errors = errors_of(capsys)
    assert code == 2 and len(errors) == 1, errors
    assert f"asks to load {asked}" in errors[0] and "--trust-file" in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def best(tmp_path_factory) -> Path:
    """best.pt of one short run (digits, a small CNN, EMA on) in <root>/t/run_001: a checkpoint of the current format."""
    out = tmp_path_factory.mktemp("trained")
    assert main.main([*fast_overrides(out, "t", epochs=1), "train.iterations=2", "train.ema={decay: 0.9}"]) == 0
    return out / "t" / "run_001" / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """One short dist.mode=fsdp run in this process: its best.dcp is a sharded checkpoint directory."""
    out = tmp_path_factory.mktemp("sharded")
    assert main.main([*fast_overrides(out, "f", epochs=1), "train.iterations=2", "dist.mode=fsdp"]) == 0
    return (out / "f" / "latest" / "checkpoints" / "best.dcp").resolve()


def with_entry(source: Path, target: Path, entry: object) -> Path:
    """A copy of checkpoint ``source`` with ``entry`` in a hook's state (no .sha256: nothing flags it as changed)."""
    data = torch.load(source, weights_only=False)
    torch.save({**data, "hooks": {**data.get("hooks", {}), "crafted": {"x": entry}}}, target)
    return target


@pytest.fixture
def crafted(best: Path, tmp_path: Path):
    """A checkpoint whose hook state runs ``touch MARKER`` when unpickled, and that marker."""
    marker = tmp_path / "MARKER"
    return with_entry(best, tmp_path / "crafted.pt", RunsCommand(marker)), marker


@pytest.mark.parametrize("path", ["test", "predict", "export", "resume", "model.pretrained", "backbone pretrained", "convert"])
def test_a_crafted_checkpoint_is_refused_on_every_path_and_its_code_never_runs(path, crafted, tmp_path, capsys):
    file, marker = crafted
    out = fast_overrides(tmp_path / "out", "x", epochs=1)
    args = {"test": ["--mode", "test", "--checkpoint", str(file)], "predict": ["--mode", "predict", "--checkpoint", str(file), "--input", str(tmp_path)],
            "export": ["--mode", "export", "--checkpoint", str(file)], "resume": [*out, "--resume", str(file)], "model.pretrained": [*out, f"model.pretrained={file}"],
            "backbone pretrained": [*out[:-1], f"model.args.backbone_args={{widths: [8, 16], pretrained: {file}}}"]}.get(path)
    if path == "convert":  # a file is refused before anything of it is read
        assert convert.main([str(file), str(tmp_path / "out.pt")]) == 2 and not (tmp_path / "out.pt").exists()
        assert errors_of(capsys) == [f"error: '{file}' is not a sharded checkpoint directory (no .metadata); it is a file already"]
    else:
        assert f"--trust-file {file}" in refused(capsys, main.main(args))
    assert not marker.exists()


@pytest.mark.parametrize("entry, asked", [(RunsCommand, "posix.system"), (TouchesFile, "pathlib.Path.touch")])
def test_a_sharded_checkpoint_whose_metadata_runs_code_is_refused(entry, asked, sharded, tmp_path, capsys):
    directory = Path(shutil.copytree(sharded, tmp_path / "run" / "checkpoints" / "epoch0000_batch000002.dcp"))
    marker = tmp_path / "MARKER"
    (directory / ".metadata").write_bytes(pickle.dumps(entry(marker)))  # a plain pickle, as DCP writes its metadata
    (directory / SUMS).write_text(sums_text(directory, SUMS, file_digest))  # listed as a writer lists it: only the content is crafted
    refused(capsys, main.main(["--mode", "test", "--checkpoint", str(directory)]), asked)
    refused(capsys, convert.main([str(directory), str(tmp_path / "out.pt")]), asked)
    resume = [*fast_overrides(tmp_path / "out", "x", epochs=1), "dist.mode=fsdp", "--resume", str(tmp_path / "run")]
    refused(capsys, main.main(resume), asked)  # refused outright, never skipped for an older checkpoint
    assert not marker.exists()


def test_a_sharded_checkpoint_whose_byte_entry_runs_code_is_refused(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    state = {"format": 3, "progress": {"epoch": 0, "batch": 1, "step": 1}, "config": {}, "model": torch.nn.Linear(3, 2).state_dict(),
             "optimizer": {"state": {}, "param_groups": [{"lr": 0.1, "params": ["weight", "bias"], "note": RunsCommand(marker)}]}}
    directory = ShardedCheckpointStore(tmp_path).save(state, 0, 1)  # DCP keeps non-tensor entries as pickled bytes
    refused(capsys, convert.main([str(directory), str(tmp_path / "out.pt")]))
    assert not marker.exists() and not (tmp_path / "out.pt").exists()


def test_trust_file_loads_exactly_the_file_it_names(best, tmp_path, capsys):
    file = with_entry(best, tmp_path / "dated.pt", datetime.date(2024, 1, 2))  # harmless, but no type our checkpoints hold
    refused(capsys, main.main(["--mode", "test", "--checkpoint", str(file)]), "datetime.date")
    other = shutil.copyfile(file, tmp_path / "other.pt")
    refused(capsys, main.main(["--mode", "test", "--checkpoint", str(other), "--trust-file", str(file)]), "datetime.date")
    linked = tmp_path / "link.pt"
    linked.symlink_to(file)  # compared by resolved path
    assert main.main(["--mode", "test", "--checkpoint", str(file), "--trust-file", str(linked)]) == 0
    assert "test: top1=" in capsys.readouterr().out


def test_checkpoints_of_every_format_load_with_numpy_s_state_as_a_tensor_or_an_old_ndarray(best, tmp_path):
    assert torch.serialization.get_unsafe_globals_in_checkpoint(best) == []  # a fresh one needs no global beyond torch's
    numpy_state = load_file(best)["rng"][0]["numpy"]
    assert numpy_state[0] == "MT19937" and isinstance(numpy_state[1], torch.Tensor)
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    rng = {**capture_rng(), "numpy": np.random.get_state()}  # as framework 0.3 and older captured it: numpy's key as an ndarray
    format_1 = {"model": model.state_dict(), "ema": None, "optimizer": {}, "scheduler": {}, "amp": {}, "epoch": 2, "batch": 6, "global_step": 30,
                "best": {"metric": "top1", "value": 0.9, "epoch": 1, "evals_since_best": 0}, "nonfinite": {"consecutive": 0, "total": 0},
                "sampler": {"epoch": 2, "batches_done": 6}, "rng": [rng], "world_size": 1, "config": {"model": {"name": "classifier"}}, "version": "0.1.0"}
    format_2 = {"format": 2, "framework": "0.2.0", "config": {}, "world_size": 1, "progress": {"epoch": 1, "batch": 0, "step": 9}, "model": model.state_dict(),
                "ema": None, "optimizer": {}, "scheduler": {}, "amp": {}, "rng": [rng], "sampler": {"epoch": 1, "seed": 0},
                "hooks": {"validation": {"metric": "top1", "value": 0.8, "epoch": 0, "evals_since_best": 0}, "checkpoint": {"best": "epoch0001_batch000000.pt"}}}
    for name, data in (("f1.pt", format_1), ("f2.pt", format_2)):
        torch.save(data, tmp_path / name)
        checkpoint = Checkpoint.load(tmp_path / name)
        assert torch.equal(checkpoint.model_weights["head.2.weight"], model.state_dict()["head.2.weight"])
        np.random.seed(1)
        restore_rng(load_file(tmp_path / name)["rng"][0])  # the ndarray form restores as before
        assert np.array_equal(np.random.get_state()[1], rng["numpy"][1])
    assert Checkpoint.load(tmp_path / "f1.pt").progress.step == 30 and Checkpoint.load(tmp_path / "f2.pt").loop_state("checkpointer")


def test_torchvision_and_timm_state_dicts_and_safetensors_files_load(tmp_path, capsys):
    import timm
    import torchvision

    torch.save(torchvision.models.resnet18().state_dict(), tmp_path / "resnet18-tv.pth")
    torch.save(torchvision.models.resnet18().state_dict(), tmp_path / "legacy.pth", _use_new_zipfile_serialization=False)
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
    args, _ = [*fast_overrides(tmp_path / "out", "st", epochs=1), "train.iterations=1", f"model.pretrained={tmp_path / 'w.safetensors'}"], capsys.readouterr()
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
    assert weights.keys() == checkpoint.eval_weights.keys() and all(torch.equal(v, checkpoint.eval_weights[k]) for k, v in weights.items())
    assert Checkpoint.load(tmp_path / "c.pt").optimizer_state()["param_groups"][0]["lr"] == checkpoint.optimizer_state()["param_groups"][0]["lr"]  # a byte entry, read weights-only
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    assert len(load_weights(model, tmp_path / "w.safetensors").loaded) == len(model.state_dict())


def test_a_half_written_sharded_checkpoint_is_named_so(sharded, tmp_path, capsys):
    directory = Path(shutil.copytree(sharded, tmp_path / "epoch0000_batch000002.dcp"))
    (directory / ".metadata").unlink()
    assert main.main(["--mode", "test", "--checkpoint", str(directory)]) == 2 and "no .metadata: it is half-written" in errors_of(capsys)[0]
    assert convert.main([str(directory), str(tmp_path / "c.pt")]) == 2 and "half-written" in errors_of(capsys)[0]
    assert main.main([*fast_overrides(tmp_path / "out", "x", epochs=1), "--resume", str(directory)]) == 2 and "half-written" in errors_of(capsys)[0]
    assert not (directory / ".lock").exists()


@pytest.mark.parametrize("damage, problem", [
    (lambda d: (d / SUMS).write_text(""), "SHA256SUMS is empty"),
    (lambda d: (d / SUMS).write_text((d / SUMS).read_text() + "not a digest line\n"), "SHA256SUMS line 5 is not '<sha256>  <file name>'"),
    (lambda d: (d / SUMS).write_text((d / SUMS).read_text() + f"{'0' * 64}  ../state.pt\n"), "SHA256SUMS line 5 names '../state.pt', not a file of the directory"),
    (lambda d: (d / SUMS).write_text((d / SUMS).read_text() + f"{'0' * 64}  ..\n"), "SHA256SUMS line 5 names '..', not a file of the directory"),
    (lambda d: (d / "extra.distcp").write_bytes(b"x"), "'extra.distcp' is in the directory but not listed in SHA256SUMS"),
    (lambda d: (d / SUMS).write_bytes(b"\xff\xfe"), "SHA256SUMS is not text"),
])
def test_sha256sums_is_read_line_by_line(damage, problem, sharded, tmp_path):
    directory = Path(shutil.copytree(sharded, tmp_path / "c.dcp"))
    assert len((directory / SUMS).read_text().splitlines()) == 4  # every file but SHA256SUMS itself
    damage(directory)
    with pytest.raises(CheckpointError) as err:
        read_state(directory)
    assert problem in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("progress"), "has no 'progress' entry"),
    (lambda d: d.update(config=["not", "a", "mapping"]), "entry 'config' is a list, expected a mapping"),
    (lambda d: d.update(progress={"epoch": "two", "batch": 0, "step": 0}), "entry 'progress' is a mapping whose 'epoch' is 'two'"),
    (lambda d: d["model"].update(extra=[1, 2]), "entry 'model' is a mapping whose 'extra' is a list"),
    (lambda d: d.update(ema={"weights": {"w": 1}, "updates": 3}), "entry 'ema' is a mapping whose 'weights' is a mapping whose 'w' is an int"),
    (lambda d: d.update(world_size=0), "entry 'world_size' is 0, expected a number of processes >= 1"),
    (lambda d: d.update(hooks=[1]), "entry 'hooks' is a list"),
])
def test_a_checkpoint_s_structure_is_checked_when_it_is_read(change, message, best, tmp_path, capsys):
    data = load_file(best)
    change(data)
    torch.save(data, tmp_path / "c.pt")
    assert main.main(["--mode", "test", "--checkpoint", str(tmp_path / "c.pt")]) == 2
    errors = errors_of(capsys)
    assert len(errors) == 1 and message in errors[0] and "damaged or not a checkpoint of this framework" in errors[0], errors


def test_pretrained_weights_that_fill_less_than_half_of_the_model_are_refused(tmp_path, capsys):
    other = NETWORKS.build("classifier", num_classes=3, backbone="small_cnn", backbone_args={"widths": [8, 32]})
    torch.save(other.state_dict(), tmp_path / "other.pt")  # only the first stage fits: 10 of 22 float tensors
    args = [*fast_overrides(tmp_path / "out", "share", epochs=1), "train.iterations=1", f"model.pretrained={tmp_path / 'other.pt'}"]
    assert main.main(args) == 2
    line = errors_of(capsys)[0]
    assert "fills only 10 of the model's 22 floating-point tensors (45%; 0 missing, 12 of another shape)" in line and "model.pretrained_min_share" in line
    assert main.main([*args, "model.pretrained_min_share=0.4"]) == 0


def test_a_timm_backbone_refuses_a_crafted_file_and_another_model_s_weights(tmp_path):
    import timm

    marker = tmp_path / "MARKER"
    torch.save({"conv1.weight": torch.zeros(1), "x": RunsCommand(marker)}, tmp_path / "resnet18.pth")
    with pytest.raises(UnsafeFileError, match="asks to load posix.system"):  # before its keys are compared
        BACKBONES.build("timm", model_name="resnet18", in_chans=1, pretrained=str(tmp_path / "resnet18.pth"))
    assert not marker.exists()
    torch.save(timm.create_model("efficientnet_b0", pretrained=False).state_dict(), tmp_path / "efficientnet_b0.pth")
    with pytest.raises(CheckpointError, match=r"fills only 0 of the model's \d+ floating-point tensors .*model.pretrained_prefix=<the backbone's prefix in the network, e.g. backbone.model.> and model.pretrained_min_share=0"):
        BACKBONES.build("timm", model_name="resnet18", pretrained=str(tmp_path / "efficientnet_b0.pth"))
    net = BACKBONES.build("timm", model_name="resnet18")
    report = load_weights(net.model, tmp_path / "efficientnet_b0.pth", minimum=MinShare(0.0))  # 0: any partial load is allowed
    assert report.loaded and not any(net.model.state_dict()[k].is_floating_point() for k in report.loaded)  # the BatchNorm counter alone


def test_resume_into_a_folder_that_is_no_run_writes_nothing(best, tmp_path, capsys):
    stranger = tmp_path / "my_documents"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    args = fast_overrides(tmp_path / "out", "x", epochs=1)
    assert main.main([*args, "--resume", str(stranger)]) == 2
    assert "is not a run folder" in errors_of(capsys)[0]
    assert sorted(p.name for p in stranger.iterdir()) == ["notes.txt"]
    assert main.main([*args, "--resume", str(best.parents[2])]) == 2  # an experiment folder: names its newest run
    assert "it holds runs: --resume" in errors_of(capsys)[0] and not (best.parents[2] / ".lock").exists()


def test_a_read_only_run_folder_on_resume_is_one_line(best, tmp_path, capsys, monkeypatch):
    disk = tmp_path / "ro"
    disk.mkdir()
    mounted = shutil.which("mount") is not None and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True).returncode == 0
    try:
        shutil.copytree(best.parents[2], disk / "t", symlinks=True)
        if not mounted or subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True).returncode != 0:
            real = os.open  # no root here: the lock's open fails as on a read-only file system
            monkeypatch.setattr(os, "open", lambda path, *a: (_ for _ in ()).throw(OSError(30, "Read-only file system")) if str(path).endswith(".lock") else real(path, *a))
        args = [f"experiment.output_root={disk}", "experiment.name=t", "train.epochs=2", "model.args.backbone_args={widths: [8, 16]}", "--resume"]
        assert main.main(args) == 2
        line = errors_of(capsys)[0]
        assert line.startswith("error: cannot take the lock") and "Read-only file system" in line and "make the folder writable" in line
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)
