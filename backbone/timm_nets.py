"""Any timm model as a multi-scale backbone: ``backbone: timm`` with ``backbone_args: {model_name: ...}``.

``timm.create_model(model_name, features_only=True, pretrained=False, ...)``: ``out_channels``
and ``strides`` come from timm's ``feature_info``; ``out_indices`` picks the stages, and any
other argument goes to ``timm.create_model`` (``drop_path_rate``, ...). Nothing is ever
downloaded: ``pretrained`` is a local file holding a timm model's ``state_dict``
(``torch.save(timm.create_model(name).state_dict(), path)`` where the weights can be
fetched); its classifier keys, which a feature extractor lacks, are dropped and logged.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import torch

from backbone.base import Backbone
from utils.errors import ConfigError
from utils.registry import BACKBONES

LOCAL_WAY = (
    "save a timm model's weights where it can download them, torch.save(timm.create_model('{name}', pretrained=True).state_dict(), '{name}.pth'), "
    "then give the file: backbone_args.pretrained={name}.pth (or model.pretrained={name}.pth model.pretrained_prefix=backbone.model.)"
)


@BACKBONES.register("timm")
class TimmBackbone(Backbone):
    """A timm ``features_only`` model; layer ids for ``optim.layer_decay`` by feature stage."""

    def __init__(
        self,
        model_name: str = "resnet18",
        out_indices: Optional[Sequence[int]] = None,
        in_chans: Optional[int] = None,
        in_channels: int = 3,
        pretrained: Union[str, bool] = "",
        **timm_args: Any,
    ) -> None:
        super().__init__()
        import timm

        if pretrained is True:
            raise ConfigError(f"backbone timm: timm's own pretrained weights are not downloaded here; {LOCAL_WAY.format(name=model_name)}")
        if not timm.is_model(model_name.split(".")[0]):  # "resnet18.a1_in1k": a model and its weights' tag
            import difflib

            close = difflib.get_close_matches(model_name, timm.list_models(), n=3, cutoff=0.6)
            raise ConfigError(f"backbone timm: unknown model_name '{model_name}'; {'did you mean ' + ', '.join(close) + '?' if close else 'see timm.list_models()'}")
        if out_indices is not None:
            timm_args["out_indices"] = tuple(out_indices)
        self.model = timm.create_model(model_name, features_only=True, pretrained=False, in_chans=in_chans or in_channels, **timm_args)
        self.out_channels: List[int] = list(self.model.feature_info.channels())
        self.strides: List[int] = list(self.model.feature_info.reduction())
        self._stage_modules = list(self.model.feature_info.module_name())
        if pretrained:
            from utils.checkpoint.weights import load_weights

            load_weights(self.model, str(pretrained))  # the classifier's keys are logged as unexpected and ignored

    def set_grad_checkpointing(self, enabled: bool = True) -> None:
        self.grad_checkpointing = enabled
        self.model.set_grad_checkpointing(enabled)  # timm's own switch

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        return list(self.model(x))

    @property
    def num_layers(self) -> int:
        return len(self._stage_modules)

    def layer_id(self, name: str) -> int:
        """The feature stage a parameter belongs to: 0 for the stem and the first stage, then one per
        returned stage (the modules between two returned stages belong to the later one)."""
        parts = name.split(".")
        if parts[0] != "model":
            return 0
        owner = ".".join(parts[1:-1])
        order = {module_name: i for i, (module_name, _) in enumerate(self.model.named_modules())}
        position = order.get(owner, 0)
        for stage, module_name in enumerate(self._stage_modules):
            if owner == module_name or owner.startswith(module_name + ".") or position < order.get(module_name, 0):
                return stage
        return len(self._stage_modules) - 1
