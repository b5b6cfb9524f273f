"""Loading never runs code: a file that asks for more than our checkpoints hold is refused on every path that reads one
(its code never runs), a sharded checkpoint's metadata and byte entries included, and a timm backbone's pretrained
file too; ``--trust-file`` trusts exactly the file it names.

(What loads: tests/checkpoint/test_checkpoint_formats.py; --resume into a folder that is no run or is read-only:
tests/checkpoint/test_resume_folders.py. The trained checkpoints they share: tests/checkpoint/conftest.py.)"""

from __future__ import annotations

import datetime
import pathlib
import pickle
import shutil
from pathlib import Path

import pytest
import torch

import main
from tests.conftest import fast_overrides
from tests.fixtures.crafted import RunsCommand, errors_of
from utils.checkpoint import convert
from utils.checkpoint.files import file_digest
from utils.checkpoint.safe_load import UnsafeFileError
from utils.checkpoint.sharded import SUMS, ShardedCheckpointStore
from utils.checkpoint.sums import sums_text
from utils.checkpoint.weights import MinShare, load_weights
from utils.errors import CheckpointError
from utils.registry import BACKBONES


class TouchesFile(RunsCommand):
    """An entry whose unpickling calls a pathlib method (a global that is an attribute of an allowed class)."""

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def refused(capsys, code: int, asked: str = "posix.system") -> str:
    """The one error line of a refused load: exit 2, it names what the file asked for and --trust-file."""
    errors = errors_of(capsys)
    assert code == 2 and len(errors) == 1, errors
    assert f"asks to load {asked}" in errors[0] and "--trust-file" in errors[0], errors[0]
    return errors[0]


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


@pytest.mark.parametrize(
    "path", ["test", "predict", "export", "resume", "model.pretrained", "backbone pretrained", "convert"]
)
def test_a_crafted_checkpoint_is_refused_on_every_path_and_its_code_never_runs(path, crafted, tmp_path, capsys):
    file, marker = crafted
    out = fast_overrides(tmp_path / "out", "x", epochs=1)
    args = {
        "test": ["--mode", "test", "--checkpoint", str(file)],
        "predict": ["--mode", "predict", "--checkpoint", str(file), "--input", str(tmp_path)],
        "export": ["--mode", "export", "--checkpoint", str(file)],
        "resume": [*out, "--resume", str(file)],
        "model.pretrained": [*out, f"model.pretrained={file}"],
        "backbone pretrained": [*out[:-1], f"model.args.backbone_args={{widths: [8, 16], pretrained: {file}}}"],
    }.get(path)
    if path == "convert":  # a file is refused before anything of it is read
        assert convert.main([str(file), str(tmp_path / "out.pt")]) == 2 and not (tmp_path / "out.pt").exists()
        assert errors_of(capsys) == [
            f"error: '{file}' is not a sharded checkpoint directory (no .metadata); it is a file already"
        ]
    else:
        assert f"--trust-file {file}" in refused(capsys, main.main(args))
    assert not marker.exists()


@pytest.mark.parametrize("entry, asked", [(RunsCommand, "posix.system"), (TouchesFile, "pathlib.Path.touch")])
def test_a_sharded_checkpoint_whose_metadata_runs_code_is_refused(entry, asked, sharded, tmp_path, capsys):
    directory = Path(shutil.copytree(sharded, tmp_path / "run" / "checkpoints" / "epoch0000_batch000002.dcp"))
    marker = tmp_path / "MARKER"
    (directory / ".metadata").write_bytes(pickle.dumps(entry(marker)))  # a plain pickle, as DCP writes its metadata
    # listed as a writer lists it: only the content is crafted
    (directory / SUMS).write_text(sums_text(directory, SUMS, file_digest))
    refused(capsys, main.main(["--mode", "test", "--checkpoint", str(directory)]), asked)
    refused(capsys, convert.main([str(directory), str(tmp_path / "out.pt")]), asked)
    resume = [*fast_overrides(tmp_path / "out", "x", epochs=1), "dist.mode=fsdp", "--resume", str(tmp_path / "run")]
    refused(capsys, main.main(resume), asked)  # refused outright, never skipped for an older checkpoint
    assert not marker.exists()


def test_a_sharded_checkpoint_whose_byte_entry_runs_code_is_refused(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    state = {
        "format": 3,
        "progress": {"epoch": 0, "batch": 1, "step": 1},
        "config": {},
        "model": torch.nn.Linear(3, 2).state_dict(),
        "optimizer": {
            "state": {},
            "param_groups": [{"lr": 0.1, "params": ["weight", "bias"], "note": RunsCommand(marker)}],
        },
    }
    directory = ShardedCheckpointStore(tmp_path).save(state, 0, 1)  # DCP keeps non-tensor entries as pickled bytes
    refused(capsys, convert.main([str(directory), str(tmp_path / "out.pt")]))
    assert not marker.exists() and not (tmp_path / "out.pt").exists()


def test_trust_file_loads_exactly_the_file_it_names(best, tmp_path, capsys):
    # harmless, but no type our checkpoints hold
    file = with_entry(best, tmp_path / "dated.pt", datetime.date(2024, 1, 2))
    refused(capsys, main.main(["--mode", "test", "--checkpoint", str(file)]), "datetime.date")
    other = shutil.copyfile(file, tmp_path / "other.pt")
    refused(
        capsys, main.main(["--mode", "test", "--checkpoint", str(other), "--trust-file", str(file)]), "datetime.date"
    )
    linked = tmp_path / "link.pt"
    linked.symlink_to(file)  # compared by resolved path
    # a checkpoint outside every run tests into <experiment.output_root>/<name>/test_NNN: the default is ./output
    out = f"experiment.output_root={tmp_path / 'output'}"
    assert main.main(["--mode", "test", "--checkpoint", str(file), "--trust-file", str(linked), out]) == 0
    assert "test: top1=" in capsys.readouterr().out


def test_a_timm_backbone_refuses_a_crafted_file_and_another_model_s_weights(tmp_path):
    import timm

    marker = tmp_path / "MARKER"
    torch.save({"conv1.weight": torch.zeros(1), "x": RunsCommand(marker)}, tmp_path / "resnet18.pth")
    with pytest.raises(UnsafeFileError, match="asks to load posix.system"):  # before its keys are compared
        BACKBONES.build("timm", model_name="resnet18", in_chans=1, pretrained=str(tmp_path / "resnet18.pth"))
    assert not marker.exists()
    torch.save(timm.create_model("efficientnet_b0", pretrained=False).state_dict(), tmp_path / "efficientnet_b0.pth")
    with pytest.raises(
        CheckpointError,
        match=r"fills only 0 of the model's \d+ floating-point tensors .*model.pretrained_prefix=<the backbone's prefix in the network, e.g. backbone.model.> and model.pretrained_min_share=0",
    ):
        BACKBONES.build("timm", model_name="resnet18", pretrained=str(tmp_path / "efficientnet_b0.pth"))
    net = BACKBONES.build("timm", model_name="resnet18")
    # 0: any partial load is allowed
    report = load_weights(net.model, tmp_path / "efficientnet_b0.pth", minimum=MinShare(0.0))
    # the BatchNorm counter alone
    assert report.loaded and not any(net.model.state_dict()[k].is_floating_point() for k in report.loaded)
