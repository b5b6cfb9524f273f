"""Any timm model as a multi-scale backbone: ``backbone: timm`` with ``backbone_args: {model_name: ...}``.

``timm.create_model(model_name, features_only=True, pretrained=False, ...)``: ``out_channels``
and ``strides`` come from timm's ``feature_info``; ``out_indices`` picks the stages, and any
other argument goes to ``timm.create_model`` (``drop_path_rate``, ...; each ``*_rate`` in [0, 1),
never ``features_only``, which the backbone sets, nor ``checkpoint_path``, ``cache_dir`` or ``pretrained_*``,
which make timm read or fetch files itself: ``check_arguments``). Nothing is ever
downloaded: ``pretrained`` is a local file holding a timm model's ``state_dict``
(``torch.save(timm.create_model(name).state_dict(), path)`` where the weights can be
fetched); its classifier keys, which a feature extractor lacks, are dropped and logged.
"""

from __future__ import annotations

import inspect
import re
import sys
from typing import Annotated, Any, Dict, List, Optional, Sequence, Union

import torch

from backbone.base import Backbone
from utils.config.arguments import Count, check_value, in_range, non_empty
from utils.errors import ConfigError, name_list
from utils.model.grad_checkpoint import keep_running_stats_in_backward
from utils.registry import BACKBONES

LOCAL_WAY = (
    "save a timm model's weights where it can download them, torch.save(timm.create_model('{name}', pretrained=True).state_dict(), '{name}.pth'), "
    "then give the file: backbone_args.pretrained={name}.pth (or model.pretrained={name}.pth model.pretrained_prefix=backbone.model.)"
)

# what timm.create_model gets from the backbone itself, and why
SETS_ITSELF = {"features_only": "it always builds timm's features_only model, whose feature maps the network reads"}
# what would make timm read or fetch a file itself, past the framework's loader (utils/checkpoint/safe_load.py)
LOADS_FILES = {
    "checkpoint_path": "makes timm load that file itself",
    "cache_dir": "is where timm downloads files to",
    "pretrained_*": "configures the weights timm would download itself",
}
Rate = Annotated[float, in_range(0, 1, high_open=True)]  # drop_rate, drop_path_rate, ...: the probability of dropping


@BACKBONES.register("timm")
class TimmBackbone(Backbone):
    """A timm ``features_only`` model; layer ids for ``optim.layer_decay`` by feature stage."""

    def __init__(
        self,
        model_name: str = "resnet18",
        out_indices: Optional[Annotated[Sequence[int], non_empty()]] = None,
        in_chans: Optional[Count] = None,
        in_channels: Optional[Count] = None,  # 3 when neither is given
        pretrained: Union[str, bool] = "",
        **timm_args: Any,
    ) -> None:
        super().__init__()
        import timm

        if pretrained is True:
            raise ConfigError(
                f"backbone timm: timm's own pretrained weights are not downloaded here; {LOCAL_WAY.format(name=model_name)}"
            )
        if not timm.is_model(model_name.split(".")[0]):  # "resnet18.a1_in1k": a model and its weights' tag
            import difflib

            close = difflib.get_close_matches(model_name, timm.list_models(), n=3, cutoff=0.6)
            raise ConfigError(
                f"backbone timm: unknown model_name '{model_name}'; {'did you mean ' + ', '.join(close) + '?' if close else 'see timm.list_models()'}"
            )
        self.check_arguments({"in_chans": in_chans, "in_channels": in_channels, **timm_args})
        if out_indices is not None:
            timm_args["out_indices"] = tuple(out_indices)
        self.model = _create(model_name, in_chans or in_channels or 3, timm_args)
        self.out_channels: List[int] = list(self.model.feature_info.channels())
        self.strides: List[int] = list(self.model.feature_info.reduction())
        self._stage_modules = list(self.model.feature_info.module_name())
        self._stats_hooks: List[torch.utils.hooks.RemovableHandle] = []
        if pretrained:
            from utils.checkpoint.weights import BACKBONE_WAY_OUT, MinShare, load_weights

            # the classifier's keys are logged as unexpected and ignored; a .safetensors file loads too, nothing runs code
            load_weights(
                self.model, str(pretrained), minimum=MinShare(way_out=BACKBONE_WAY_OUT.format(prefix="backbone.model."))
            )

    @staticmethod
    def check_input_size(input_size: List[int], args: Dict[str, Any]) -> None:
        """When the config is checked: ConfigError when ``model.input_size`` is not the one size a
        fixed-size timm model (a ViT: its pretrained_cfg's ``fixed_input_size``) takes."""
        from timm.models import get_pretrained_cfg

        name = str(args.get("model_name", "resnet18"))
        cfg = get_pretrained_cfg(name)
        if cfg is None or not cfg.fixed_input_size or args.get("dynamic_img_size"):
            return
        size = args.get("img_size", cfg.input_size[-2:])
        size = [size, size] if isinstance(size, int) else list(size)
        given = list(input_size[-2:])
        if given != size:
            fix = given[0] if given[0] == given[1] else given
            raise ConfigError(
                f"backbone timm: {name} takes inputs of {size[0]}x{size[1]} only (timm's fixed_input_size), but model.input_size is {list(input_size)}; "
                f"set model.input_size=[{input_size[0]}, {size[0]}, {size[1]}] and resize the data to it, or build the model for your size "
                f"with model.args.backbone_args.img_size={fix} (or dynamic_img_size: true)"
            )

    @staticmethod
    def check_arguments(args: Dict[str, Any]) -> None:
        """When the config is checked (and when built): ConfigError for an argument the backbone sets itself
        (``SETS_ITSELF``) or that makes timm read or fetch a file itself (``LOADS_FILES``), for ``in_chans`` and
        ``in_channels`` that disagree, and for a rate (``*_rate``, which goes on to timm unannotated) outside [0, 1)."""
        for name in SETS_ITSELF:
            if name in args:
                raise ConfigError(
                    f"backbone timm: {name} is set by the backbone itself ({SETS_ITSELF[name]}); remove it from model.args.backbone_args"
                )
        for name in args:
            why = LOADS_FILES.get("pretrained_*" if name.startswith("pretrained_") else name)
            if why is not None:
                raise ConfigError(
                    f"backbone timm: {name} {why}, past the framework's loader (which never runs code); remove it and give a local "
                    "weights file as the backbone's pretrained (model.args.backbone_args.pretrained=FILE.pth)"
                )
        chans, channels = args.get("in_chans"), args.get("in_channels")
        if chans is not None and channels is not None and chans != channels:
            raise ConfigError(
                f"backbone timm: in_chans={chans!r} and in_channels={channels!r} disagree (both give the input's channel count; one would be ignored); "
                "give the count once, as in_channels (in model.args.backbone_args, or model.args.in_channels for a network that passes it)"
            )
        for name, value in args.items():
            if name.endswith("_rate"):
                check_value("backbone 'timm'", "model.args.backbone_args", name, value, Rate)

    def set_grad_checkpointing(self, enabled: bool = True) -> None:
        """timm's own switch (``features_only`` models checkpoint each module between the first and the last);
        timm's recomputation would update BatchNorm running statistics a second time, which hooks prevent."""
        self.grad_checkpointing = enabled
        self.model.set_grad_checkpointing(enabled)
        for handle in self._stats_hooks:
            handle.remove()
        self._stats_hooks = keep_running_stats_in_backward(self.model) if enabled else []

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


def _create(model_name: str, in_chans: int, timm_args: Dict[str, Any]) -> Any:
    """``timm.create_model(features_only=True)``; an argument the model does not take and feature
    stages it does not have are ConfigErrors naming what it takes (each checked against timm
    before it is reported: any other failure keeps its traceback)."""
    import timm

    try:
        return timm.create_model(model_name, features_only=True, pretrained=False, in_chans=in_chans, **timm_args)
    except TypeError as err:
        unknown = [key for key in timm_args if f"unexpected keyword argument '{key}'" in str(err)]
        if not unknown:
            raise
        raise ConfigError(
            f"backbone timm: {model_name} got an argument it does not take, '{unknown[0]}' ({err}); "
            f"remove it from model.args.backbone_args{_takes(model_name, str(err))}"
        ) from None
    except (IndexError, AssertionError):
        indices = timm_args.get("out_indices")
        if indices is None:
            raise
        probe = timm.create_model(
            model_name,
            features_only=True,
            pretrained=False,
            in_chans=in_chans,
            **{k: v for k, v in timm_args.items() if k != "out_indices"},
        )
        stages = len(probe.feature_info.info)
        outside = [i for i in indices if not -stages <= i < stages]
        if not outside:
            raise
        raise ConfigError(
            f"backbone timm: out_indices {list(indices)} are out of range for {model_name}, which has {stages} feature stages; "
            f"give indices from 0 to {stages - 1} (or -{stages} to -1) in model.args.backbone_args.out_indices"
        ) from None


def _takes(model_name: str, message: str) -> str:
    """``; it takes: ...``: the arguments of the timm class the error names (``ResNet.__init__()``), when found."""
    import timm

    found = re.search(r"(\w+)\.__init__\(\)", message)
    module = sys.modules.get(getattr(timm.models.model_entrypoint(model_name.split(".")[0]), "__module__", ""))
    cls = getattr(module, found.group(1), None) if found and module else None
    if not isinstance(cls, type):
        return ""
    names = [n for n, p in inspect.signature(cls).parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return f"; {cls.__name__} takes: {name_list(names, show=20)}"
