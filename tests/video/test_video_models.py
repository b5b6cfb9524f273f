"""Video networks: pretrained torchvision weights from a local file, the single-frame baseline, input checks."""

import pytest
import torch
import torchvision

from utils.errors import ConfigError
from utils.registry import NETWORKS


def test_torchvision_video_backbone_loads_a_local_torchvision_state_dict(tmp_path):
    torch.manual_seed(1)
    source = torchvision.models.video.mc3_18(weights=None)
    path = tmp_path / "mc3_18.pth"
    torch.save(source.state_dict(), path)
    net = NETWORKS.build("video_classifier", num_classes=3, backbone="mc3_18", backbone_args={"pretrained": str(path)})
    assert torch.equal(net.backbone.stages[0][0].weight, source.stem[0].weight)
    assert torch.equal(net.backbone.stages[4][1].conv2[0].weight, source.layer4[1].conv2[0].weight)
    source.eval(), net.backbone.eval()
    x = torch.randn(1, 3, 4, 32, 32)
    with torch.no_grad():
        expected = source.layer4(source.layer3(source.layer2(source.layer1(source.stem(x)))))
        assert torch.allclose(net.backbone(x)[-1], expected)


def test_frame_classifier_sees_only_its_frame_and_all_frames_ignore_order():
    torch.manual_seed(0)
    middle = NETWORKS.build(
        "frame_classifier", num_classes=4, backbone_args={"in_channels": 3, "widths": [4, 8]}
    ).eval()
    clip = torch.randn(2, 3, 5, 16, 16)
    other = clip.clone()
    other[:, :, [0, 1, 3, 4]] = torch.randn(2, 3, 4, 16, 16)
    with torch.no_grad():
        assert torch.allclose(middle(clip), middle(other))
        assert not torch.allclose(middle(clip), middle(clip.roll(1, dims=2)))
    every = NETWORKS.build(
        "frame_classifier", num_classes=4, backbone_args={"in_channels": 3, "widths": [4, 8]}, frames="all"
    ).eval()
    with torch.no_grad():
        assert torch.allclose(every(clip), every(clip.flip(2)), atol=1e-6)  # time reversed: same answer


def test_video_networks_reject_images_with_the_fix():
    net = NETWORKS.build("video_classifier", num_classes=3, backbone_args={"widths": [4]})
    with pytest.raises(ConfigError, match=r"takes clips \[B, C, T, H, W\].*video dataset"):
        net(torch.randn(2, 3, 16, 16))
