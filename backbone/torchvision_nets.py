"""torchvision's ResNets and VGG16 (with and without BN) as multi-scale backbones.

Weights come only from a local file (``pretrained: path``) holding torchvision's
state_dict for that architecture; nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib

from torch import nn

from backbone.base import Backbone
from utils.config.arguments import Count
from utils.registry import BACKBONES


def _load_torchvision(arch: str, pretrained: str) -> nn.Module:
    # torchvision is imported by the network that uses it: it costs about 1 s, which a run
    # of another backbone (or --help) should not pay
    model = getattr(importlib.import_module("torchvision.models"), arch)(weights=None)
    if pretrained:
        from utils.checkpoint.weights import load_weights

        load_weights(model, pretrained)
    return model


class ResNetBackbone(Backbone):
    """Stages with strides 2, 4, 8, 16, 32: stem, layer1 (after max-pool), layer2-4."""

    def __init__(self, arch: str, in_channels: Count = 3, pretrained: str = "") -> None:
        super().__init__()
        net = _load_torchvision(arch, pretrained)
        if in_channels != 3:
            net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.stages.extend(
            [
                nn.Sequential(net.conv1, net.bn1, net.relu),
                nn.Sequential(net.maxpool, net.layer1),
                net.layer2,
                net.layer3,
                net.layer4,
            ]
        )
        expansion = 4 if arch in ("resnet50", "resnet101", "resnet152") else 1
        self.out_channels = [64] + [c * expansion for c in (64, 128, 256, 512)]
        self.strides = [2, 4, 8, 16, 32]
        self.blocks = [len(layer) for layer in (net.layer1, net.layer2, net.layer3, net.layer4)]

    @property
    def num_layers(self) -> int:
        """The stem plus one layer per residual block (resnet18: 1 + 8)."""
        return 1 + sum(self.blocks)

    def layer_id(self, name: str) -> int:
        """0 for the stem, then residual blocks in order (timm's grouping for layer-wise LR decay)."""
        parts = name.split(".")
        if parts[0] != "stages" or len(parts) < 3 or parts[1] == "0":
            return 0
        stage = int(parts[1])
        block = int(parts[3]) if stage == 1 else int(parts[2])  # stage 1 is (maxpool, layer1)
        return 1 + sum(self.blocks[: stage - 1]) + block


def _resnet(arch: str) -> type:
    def __init__(self, in_channels: Count = 3, pretrained: str = "") -> None:
        ResNetBackbone.__init__(self, arch, in_channels, pretrained)

    cls = type(arch, (ResNetBackbone,), {"__init__": __init__, "__doc__": f"torchvision {arch} as a 5-stage backbone."})
    return BACKBONES.register(arch)(cls)


ResNet18 = _resnet("resnet18")
ResNet34 = _resnet("resnet34")
ResNet50 = _resnet("resnet50")


class VGGBackbone(Backbone):
    """Stages with strides 1, 2, 4, 8, 16 (the five conv blocks; the last max-pool dropped)."""

    def __init__(self, arch: str, in_channels: Count = 3, pretrained: str = "") -> None:
        super().__init__()
        features = _load_torchvision(arch, pretrained).features
        if in_channels != 3:
            features[0] = nn.Conv2d(in_channels, 64, kernel_size=3, padding=1)
        pools = [i for i, layer in enumerate(features) if isinstance(layer, nn.MaxPool2d)]
        starts = [0] + pools[:-1]
        ends = pools
        self.stages.extend(nn.Sequential(*features[s:e]) for s, e in zip(starts, ends))
        self.out_channels = [64, 128, 256, 512, 512]
        self.strides = [1, 2, 4, 8, 16]


@BACKBONES.register("vgg16_bn")
class VGG16BN(VGGBackbone):
    """torchvision vgg16_bn as a 5-stage backbone."""

    def __init__(self, in_channels: Count = 3, pretrained: str = "") -> None:
        super().__init__("vgg16_bn", in_channels, pretrained)


@BACKBONES.register("vgg16")
class VGG16(VGGBackbone):
    """torchvision vgg16 (no BatchNorm, as in MINet-VGG16) as a 5-stage backbone."""

    def __init__(self, in_channels: Count = 3, pretrained: str = "") -> None:
        super().__init__("vgg16", in_channels, pretrained)
