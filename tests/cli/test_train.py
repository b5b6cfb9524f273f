"""End-to-end runs of main.py in this process: train, resume, test mode, outputs."""

import re

import pytest
import torch
from torch import nn

import main
from tests.conftest import fast_overrides
from tests.fixtures.metrics_rows import rows
from utils.registry import BACKBONES, NETWORKS


def printed_metrics(text: str) -> dict:
    line = [row for row in text.splitlines() if row.startswith("test: ")][-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.eE]+)", line)}


@pytest.mark.slow
def test_default_experiment_reaches_accuracy_and_test_mode_reproduces_it(out_root, capsys):
    assert main.main([f"experiment.output_root={out_root}"]) == 0
    trained = printed_metrics(capsys.readouterr().out)
    assert trained["top1"] >= 0.95

    run = out_root / "digits_small_cnn" / "latest"
    assert (run / "config.yaml").is_file() and (run / "log.txt").is_file()
    recorded = rows(run)
    assert [r["epoch"] for r in recorded if r["split"] == "val"] == list(range(15))
    assert recorded[-1]["split"] == "test" and set(recorded[-1]) >= {"top1", "top5", "loss", "epoch"}

    # test mode needs nothing but the checkpoint, and reports the same numbers, in a folder of its own
    assert main.main(["--mode", "test", "--checkpoint", str(run / "checkpoints" / "best.pt")]) == 0
    tested = printed_metrics(capsys.readouterr().out)
    assert tested == trained
    (row,) = rows(out_root / "digits_small_cnn" / "test_001")
    assert row["split"] == "test" and row["top1"] == recorded[-1]["top1"]
    assert rows(run) == recorded  # the training run's record is untouched

    # the resolved config feeds back through --config
    assert (
        main.main(
            [
                "--config",
                str(run / "config.yaml"),
                "--mode",
                "test",
                "--checkpoint",
                str(run / "checkpoints" / "best.pt"),
            ]
        )
        == 0
    )
    assert printed_metrics(capsys.readouterr().out) == trained

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {
        "train/loss",
        "train/lr",
        "val/top1",
        "val/loss",
        "train_epoch/samples_per_s",
        "test/top1",
        "test/loss",
    } <= tags
    assert len(acc.Scalars("val/top1")) == 15
    assert acc.Scalars("test/top1")[0].value == pytest.approx(trained["top1"], abs=1e-4)
    # the classification hooks' pictures: a confusion matrix per validation and for the test, the worst mistakes
    acc = EventAccumulator(str(run / "tb"), size_guidance={"images": 0})
    acc.Reload()
    assert {"val/confusion_matrix", "test/confusion_matrix", "val/confident_mistakes"} <= set(acc.Tags()["images"])
    # at the step ending each epoch
    assert [e.step for e in acc.Images("val/confusion_matrix")] == [19 * (epoch + 1) for epoch in range(15)]
    test_matrices = acc.Images("test/confusion_matrix")  # the run's own test (--mode test writes elsewhere)
    # 10 classes of 28-px cells with labels
    assert len(test_matrices) == 1 and {(m.width, m.height) for m in test_matrices} == {(316, 340)}

    # test mode alone writes the test metrics too (no empty event file)
    assert (
        main.main(
            [
                "--mode",
                "test",
                "--checkpoint",
                str(run / "checkpoints" / "best.pt"),
                f"experiment.output_root={out_root / 'tested'}",
            ]
        )
        == 0
    )
    (events,) = (out_root / "tested" / "digits_small_cnn" / "test_001" / "tb").glob("events.out.tfevents.*")
    acc = EventAccumulator(str(events))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"test/top1", "test/top5", "test/loss", "test/samples"}


def test_resume_continues_from_the_saved_epoch(out_root, caplog):
    args = fast_overrides(out_root, "resume", epochs=2)
    assert main.main(args) == 0
    ckpt = out_root / "resume" / "latest" / "checkpoints" / "last.pt"
    first = torch.load(ckpt, weights_only=False)
    assert first["progress"]["epoch"] == 2
    assert (
        main.main(["--resume", str(out_root / "resume" / "run_001"), *args, "train.epochs=3"]) == 0
    )  # finished: named
    second = torch.load(ckpt, weights_only=False)
    assert second["progress"]["epoch"] == 3 and second["progress"]["step"] > first["progress"]["step"]
    assert "resumed from" in caplog.text
    vals = [r["epoch"] for r in rows(out_root / "resume" / "latest", "val")]
    assert vals == [0, 1, 2]  # epochs 0 and 1 were not trained again


@NETWORKS.register("tiny_test_net")
class TinyTestNet(nn.Module):
    """A user network defined outside the framework's folders."""

    def __init__(self, num_classes: int = 10, hidden: int = 16):
        super().__init__()
        self.backbone = BACKBONES.build("small_cnn", widths=(hidden,))
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.head(self.backbone(x)[-1].mean(dim=(2, 3)))


def test_network_registered_in_a_test_file_trains_by_name(out_root, capsys):
    args = [
        f"experiment.output_root={out_root}",
        "experiment.name=custom",
        "train.epochs=3",
        "model.name=tiny_test_net",
        "model.args={num_classes: 10, hidden: 16}",
    ]
    assert main.main(args) == 0
    metrics = printed_metrics(capsys.readouterr().out)
    assert metrics["top1"] > 0.3  # learned something in 3 epochs (chance is 0.1)
    state = torch.load(out_root / "custom" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert "head.weight" in state["model"] and state["config"]["model"]["name"] == "tiny_test_net"


def test_pretrained_weights_with_another_head_load_the_matching_tensors(out_root, caplog):
    src = NETWORKS.build("classifier", num_classes=3, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    path = out_root / "src.pt"
    torch.save({"model": src.state_dict()}, path)
    args = fast_overrides(out_root, "pre", epochs=1) + [f"model.pretrained={path}"]
    assert main.main(args) == 0
    assert "loaded" in caplog.text and "shape-mismatched" in caplog.text and "head.2.weight" in caplog.text


def test_bad_input_is_one_line_and_nonzero(out_root, capsys):
    assert main.main([f"experiment.output_root={out_root}", "model.name=clasifier"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert "Traceback" not in err and len(errors) == 1
    assert "unknown network 'clasifier'" in errors[0] and "did you mean 'classifier'" in errors[0]
    assert main.main(["--mode", "test", "--checkpoint", str(out_root / "missing.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err
