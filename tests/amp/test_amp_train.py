"""Mixed precision through main.py on the digits experiment (CPU, real bf16/fp16)."""

import re
import subprocess
import sys

import pytest
import torch
from torch.nn.modules.batchnorm import _BatchNorm

import main
from tests.conftest import ROOT, fast_overrides, subprocess_env
from tests.fixtures.metrics_rows import rows
from utils.amp import Amp, apex_amp_available
from utils.checkpoint.readers import load_file
from utils.config.schema import AmpConfig
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts
from utils.model.criterion import build_criterion
from utils.registry import NETWORKS


def printed_metrics(text: str) -> dict:
    line = [row for row in text.splitlines() if row.startswith("test: ")][-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.eE]+)", line)}


@pytest.mark.slow
@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3"])
def test_each_opt_level_trains_digits_in_bf16(level, out_root, capsys):
    # narrow layers and 10 epochs: bf16 convolutions are slow on CPUs without bf16 instructions
    assert (
        main.main(fast_overrides(out_root, "bf16", epochs=10) + [f"amp.opt_level={level}", "amp.dtype=bfloat16"]) == 0
    )
    trained = printed_metrics(capsys.readouterr().out)
    assert trained["top1"] >= 0.93
    best = out_root / "bf16" / "latest" / "checkpoints" / "best.pt"
    state = load_file(best)
    low = torch.float32 if level in ("O0", "O1") else torch.bfloat16
    assert state["model"]["backbone.stages.0.0.0.weight"].dtype == low  # a conv weight
    # its BatchNorm
    assert state["model"]["backbone.stages.0.0.1.weight"].dtype == (low if level == "O3" else torch.float32)
    if level == "O2":
        assert all(m.dtype == torch.float32 for m in state["amp"]["master_params"])
    # test mode evaluates at the level the checkpoint was trained with and reproduces the numbers
    assert main.main(["--mode", "test", "--checkpoint", str(best)]) == 0
    assert printed_metrics(capsys.readouterr().out) == trained


def test_o0_is_unchanged_by_the_other_amp_keys(out_root):
    assert main.main(fast_overrides(out_root, "plain")) == 0
    amp_keys = ["amp.opt_level=O0", "amp.backend=native", "amp.dtype=float16", "amp.loss_scale=128"]
    assert main.main(fast_overrides(out_root, "o0") + amp_keys) == 0
    assert rows(out_root / "plain" / "latest") == rows(out_root / "o0" / "latest")
    a = load_file(out_root / "plain" / "latest" / "checkpoints" / "last.pt")
    b = load_file(out_root / "o0" / "latest" / "checkpoints" / "last.pt")
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_overflowing_steps_are_skipped_counted_and_do_not_advance_the_schedule(out_root, caplog):
    # A static scale of 1e30 overflows every fp16 gradient: every step must be skipped.
    args = fast_overrides(out_root, "overflow", epochs=1) + [
        "amp.opt_level=O1",
        "amp.dtype=float16",
        "amp.loss_scale=1e30",
    ]
    assert main.main(args) == 0
    state = load_file(out_root / "overflow" / "latest" / "checkpoints" / "last.pt")
    assert state["progress"]["step"] > 0 and state["amp"]["skipped_steps"] == state["progress"]["step"]
    assert state["scheduler"]["last_epoch"] == 0
    assert "gradient overflow: step skipped" in caplog.text
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out_root / "overflow" / "latest" / "tb"))
    acc.Reload()
    assert [s.value for s in acc.Scalars("train_epoch/skipped_steps")] == [state["progress"]["step"]]
    assert [s.value for s in acc.Scalars("train_epoch/steps")] == [0]


@pytest.mark.slow  # over 2 s
def test_resume_continues_the_loss_scale_and_the_fp32_masters(out_root):
    args = fast_overrides(out_root, "resume", epochs=1) + [
        "amp.opt_level=O2",
        "amp.dtype=float16",
        "train.clip_grad_norm=5.0",
        "train.accumulate=2",
    ]
    assert main.main(args) == 0
    path = out_root / "resume" / "latest" / "checkpoints" / "last.pt"
    state = torch.load(path, weights_only=False)
    assert state["amp"]["loss_scaler"]["dynamic"]
    state["amp"]["loss_scaler"]["scale"] = 1234.0  # a value no fresh run starts from
    torch.save(state, path)
    for checksum in path.parent.glob("*.sha256"):  # an edited checkpoint no longer matches its checksum
        checksum.unlink()
    assert main.main(["--resume", str(out_root / "resume" / "run_001"), *args, "train.epochs=2"]) == 0
    resumed = load_file(path)
    newly_skipped = resumed["amp"]["skipped_steps"] - state["amp"]["skipped_steps"]
    assert resumed["amp"]["loss_scaler"]["scale"] == 1234.0 * 0.5**newly_skipped
    # the model weights are the masters rounded to fp16, in the order the optimizer holds them
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    names = {id(p): n for n, p in model.named_parameters()}
    bn = {id(p) for m in model.modules() if isinstance(m, _BatchNorm) for p in m.parameters()}
    from utils.optim.optimizers import param_groups

    order = [names[id(p)] for g in param_groups(model, 1e-4) for p in g["params"] if id(p) not in bn]
    masters = resumed["amp"]["master_params"]
    assert len(order) == len(masters)
    for name, master in zip(order, masters):
        assert torch.equal(resumed["model"][name], master.to(torch.float16))


@pytest.mark.parametrize("level, expected", [("O0", torch.float32), ("O1", torch.bfloat16)])
def test_o1_runs_the_framework_step_under_bf16_autocast_and_o0_does_not(level, expected):
    torch.manual_seed(0)
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8]})
    seen = []
    for layer in (model.backbone.stages[0][0][0], model.head[-1]):  # the first conv and the last linear layer
        layer.register_forward_hook(lambda module, args, output: seen.append(output.dtype))
    amp = Amp(AmpConfig(opt_level=level, dtype="bfloat16"), torch.device("cpu"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = amp.initialize(model, optimizer)
    batches = [(torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,)))]
    parts = Parts(
        model,
        build_criterion([{"name": "cross_entropy"}]),
        amp,
        optimizer,
        torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0),
        train_loader=batches,
    )
    Trainer(parts, LoopOptions()).fit()
    assert seen == [expected, expected]
    assert all(p.dtype == torch.float32 for p in model.parameters())  # O1 keeps the weights fp32


@pytest.mark.skipif(apex_amp_available(), reason="apex.amp is installed here")
def test_apex_backend_without_apex_is_one_line_and_exit_2(out_root, capsys):
    assert main.main(fast_overrides(out_root, "apex") + ["amp.opt_level=O2", "amp.backend=apex"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert "Traceback" not in err and len(errors) == 1
    assert "apex >= 25.07 has no amp" in errors[0] and "amp.backend=native" in errors[0]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_o2_under_ddp_keeps_the_ranks_masters_and_weights_identical():
    worker = ROOT / "tests" / "fixtures" / "amp_ddp_worker.py"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(worker),
        "bfloat16",
        "float16",
    ]
    result = subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=150)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    lines = result.stdout.splitlines()
    assert "bfloat16: ranks in sync" in lines and "float16: ranks in sync" in lines
