"""backbone: timm: timm's features_only models as backbones, weights only from local files."""

from __future__ import annotations

import re

import pytest
import torch

import main
from utils.checkpoint.weights import load_weights
from utils.errors import ConfigError
from utils.registry import BACKBONES, NETWORKS


@pytest.mark.slow  # over 2 s
def test_digits_classifier_on_timm_resnet18_trains(out_root, capsys):
    args = [
        "--config",
        "configs/digits_timm_resnet18.yaml",
        f"experiment.output_root={out_root}",
        "train.iterations=3",
        "threads=1",
        "optim.layer_decay=0.7",
        "model.grad_checkpointing=true",
        "data.args.val_fraction=0.03",
        "data.args.test_fraction=0.03",
        "data.batch_size=16",
    ]
    assert main.main(args) == 0
    assert re.search(r"test: top1=[\d.]+ .*samples=\d+", capsys.readouterr().out)


def test_a_local_timm_state_dict_loads_and_timm_weights_are_never_downloaded(tmp_path):
    import timm

    source = timm.create_model("resnet18", pretrained=False, in_chans=1)
    torch.save(source.state_dict(), tmp_path / "resnet18.pth")  # as a user saves it: with the classifier (fc.*)
    net = NETWORKS.build(
        "classifier", num_classes=3, backbone="timm", backbone_args={"model_name": "resnet18", "in_chans": 1}
    )
    # model.pretrained + model.pretrained_prefix
    report = load_weights(net, tmp_path / "resnet18.pth", prefix="backbone.model.")
    assert sorted(report.unexpected) == ["backbone.model.fc.bias", "backbone.model.fc.weight"]
    assert torch.equal(net.backbone.model.layer4[1].conv2.weight, source.layer4[1].conv2.weight)
    # backbone_args.pretrained
    own = BACKBONES.build("timm", model_name="resnet18", in_chans=1, pretrained=str(tmp_path / "resnet18.pth"))
    assert torch.equal(own.model.conv1.weight, source.conv1.weight)
    with pytest.raises(ConfigError, match=r"backbone_args.pretrained=resnet18.pth"):
        BACKBONES.build("timm", model_name="resnet18", pretrained=True)
    with pytest.raises(ConfigError, match="did you mean resnet18"):
        BACKBONES.build("timm", model_name="resnt18")


def test_minet_on_timm_efficientnet_b0_trains_a_step():
    net = NETWORKS.build(
        "minet",
        backbone="timm",
        backbone_args={"model_name": "efficientnet_b0"},
        channels=8,
        sim_channels=8,
        head_channels=8,
    )
    assert net.backbone.out_channels == [16, 24, 40, 112, 320]
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(2, 3, 64, 64), (torch.rand(2, 1, 64, 64) > 0.5).float()
    losses = []
    for _ in range(2):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
