"""Bad checkpoints and resumes get one ``error:`` line naming the file and the fix, exit code 2, no traceback: a
missing, corrupt or bit-flipped checkpoint, one of another network, --resume with nothing to resume, with a
changed model or data, on another world size, or with every checkpoint corrupt; --resume-force accepts a
changed data config. All against one finished 1-epoch run, trained once for the module.

Each case is a row of the README's "Reliability" table. (Config values: tests/cli/test_bad_input.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict, List

import pytest
import torch

import main
from tests.conftest import fast_overrides
from tests.fixtures.bad_input import exits_2_with_one_error_line
from utils.checkpoint.store import CheckpointStore


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
    "checkpoint path missing": (
        lambda tmp, run: ["--mode", "test", "--checkpoint", str(tmp / "missing.pt")],
        r"checkpoint '.*missing.pt' does not exist; check the path",
    ),
    "corrupt checkpoint": (
        lambda tmp, run: (
            (tmp / "c.pt").write_bytes(b"garbage") and ["--mode", "test", "--checkpoint", str(tmp / "c.pt")]
        ),
        r"checkpoint '.*c.pt' is corrupt or not a PyTorch file",
    ),
    "--resume without a checkpoint": (
        lambda tmp, run: ["--resume"],
        r"--resume: no checkpoint in '.*'; train without --resume first",
    ),
    "resume with a changed model": (
        lambda tmp, run: [
            *fast_overrides(run, "run", epochs=2),
            "--resume",  # a finished run continues only when named
            str(run / "run" / "run_001"),
            "model.args.backbone_args={widths: [8, 32]}",
            "data.batch_size=32",
        ],
        r"cannot resume from '.*': the config changed the model or the data \(data.batch_size: 64 -> 32; model.args.backbone_args.widths: \[8, 16\] -> \[8, 32\]\); .*--resume-force",
    ),
    "checkpoint of another network": (
        lambda tmp, run: [
            "--mode",
            "test",
            "--checkpoint",
            str(run / "run" / "latest" / "checkpoints" / "last.pt"),
            "model.args.backbone_args={widths: [8, 32]}",
        ],
        r"does not fit network 'classifier' \(.*shape \(checkpoint -> network\): backbone.stages.1.0.0.weight: \(16, 8, 3, 3\) -> \(32, 8, 3, 3\).*\); it was saved by another network",
    ),
    "bit-flipped checkpoint (--mode test)": (
        lambda tmp, run: _flipped_best(run, tmp),
        r"checkpoint '.*best.pt': checksum mismatch \(stored [0-9a-f]{12}\.\.\., file [0-9a-f]{12}\.\.\.\): the file is truncated or corrupt; .*delete its .sha256",
    ),
    "resume on another world size without a global batch": (
        lambda tmp, run: _as_if_two_ranks(run, tmp) + ["--resume", str(tmp / "out" / "two" / "run_001")],
        r"cannot resume from '.*': the config changed the model or the data \(world size: 2 -> 1, which changes the global batch from 2 x 64 = 128 to 1 x 64 = 64 samples \(resume with 2 processes; a run started with data.global_batch_size resumes on any world size that divides it\)\)",
    ),
    "every checkpoint corrupt": (
        lambda tmp, run: _copy_corrupt(run, tmp) + ["--resume", str(tmp / "out" / "broken" / "run_001")],
        r"no usable checkpoint in '.*': .*checksum mismatch.*move the folder away to start afresh",
    ),
    "pretrained weights of integers (model.pretrained)": (
        lambda tmp, run: _altered_weights(run, tmp, lambda t: t.long() if t.is_floating_point() else t),
        r"'.*altered.pt' holds \d+ tensor\(s\) of another kind than the network's \(backbone.stages.0.0.0.weight: torch.int64 -> torch.float32, .*; file -> network\): integers are never loaded as floating-point weights",
    ),
    "pretrained weights of NaN (model.pretrained)": (
        lambda tmp, run: _altered_weights(
            run, tmp, lambda t: torch.full_like(t, float("nan")) if t.is_floating_point() else t
        ),
        r"'.*altered.pt' holds NaN or infinite values in \d+ tensor\(s\) \(backbone.stages.0.0.0.weight, .*\): a network loaded from it computes NaN; use another file",
    ),
    "checkpoint of float counters (--mode test)": (
        lambda tmp, run: _altered_weights(run, tmp, lambda t: t if t.is_floating_point() else t.float(), test=True),
        r"'.*altered.pt' holds \d+ tensor\(s\) of another kind than the network's \(backbone.*num_batches_tracked: torch.float32 -> torch.int64",
    ),
}


def _altered_weights(run: Path, tmp: Path, change, test: bool = False) -> List[str]:
    """The run's network weights with ``change`` applied to each tensor, as a plain state_dict (pretrained weights)
    or as a whole checkpoint (``test``) saved with ``torch.save``."""
    data = torch.load(run / "run" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    weights = {k: change(v) for k, v in data["model"].items()}
    if test:
        data["model"] = weights
    torch.save(data if test else weights, tmp / "altered.pt")
    return (
        ["--mode", "test", "--checkpoint", str(tmp / "altered.pt")]
        if test
        else [f"model.pretrained={tmp / 'altered.pt'}"]
    )


def _flipped_best(run: Path, tmp: Path) -> List[str]:
    """A copy of the run whose best.pt has one flipped byte in its tensor data (it still loads)."""
    shutil.copytree(run / "run", tmp / "flipped", symlinks=True)
    best = tmp / "flipped" / "latest" / "checkpoints" / "best.pt"
    data = bytearray(best.read_bytes())
    data[len(data) // 2] ^= 0xFF
    best.write_bytes(bytes(data))
    return ["--mode", "test", "--checkpoint", str(best)]


def _as_if_two_ranks(run: Path, tmp: Path) -> List[str]:
    """A copy of the run whose newest checkpoint says 2 processes wrote it (re-saved with its checksum)."""
    shutil.copytree(run / "run", tmp / "out" / "two", symlinks=True)
    store = CheckpointStore(tmp / "out" / "two" / "latest" / "checkpoints")
    data = torch.load(store.latest_usable(), weights_only=False)
    data["world_size"] = 2
    store.best = data["loop"]["validator"]["file"]
    store.save(data, data["progress"]["epoch"], data["progress"]["batch"])
    return fast_overrides(tmp / "out", "two", epochs=2)


def _copy_corrupt(run: Path, tmp: Path) -> List[str]:
    shutil.copytree(run / "run", tmp / "out" / "broken", symlinks=True)
    _corrupt_all(tmp / "out" / "broken" / "latest" / "checkpoints")
    return fast_overrides(tmp / "out", "broken", epochs=2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_checkpoint_or_resume_is_one_line_and_exit_code_2(case, tmp_path, trained, capsys):
    make_args, expected = CASES[case]
    exits_2_with_one_error_line(make_args(tmp_path, trained), expected, tmp_path, capsys)


def test_resume_force_accepts_a_changed_data_config(trained, tmp_path, caplog):
    # the shared run stays as the other cases expect it
    shutil.copytree(trained / "run", tmp_path / "run", symlinks=True)
    run = str(tmp_path / "run" / "run_001")
    args = [*fast_overrides(tmp_path, "run", epochs=2), "--resume", run, "--resume-force", "data.batch_size=32"]
    assert main.main(args) == 0
    assert "--resume-force: resuming" in caplog.text and "data.batch_size: 64 -> 32" in caplog.text
