"""Bad input found by the first forward pass: a channel mismatch between the data and the network, or
fewer outputs than the data has classes (the loss would fail with "Target 2 is out of bounds")."""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

import torch

from utils.errors import ConfigError, name_list

_CHANNELS = re.compile(r"expected input\[([^\]]*)\] to have (\d+) channels, but got (\d+) channels")


def input_error(err: RuntimeError) -> Exception:
    """A first-batch channel mismatch as a ConfigError saying what to change; other errors unchanged."""
    match = _CHANNELS.search(str(err))
    if not match:
        return err
    return ConfigError(
        f"the data has {match.group(3)} channel(s) per input but the network's first layer expects {match.group(2)}; "
        "set the backbone's in_channels (e.g. model.args.backbone_args={in_channels: "
        + match.group(3)
        + "}) or change the data"
    )


def check_output_classes(outputs: Any, num_classes: Optional[int], classes: Optional[Sequence[Any]] = None) -> None:
    """ConfigError when the network scores fewer classes (dim 1 of its output) than the data has.

    Any network and any dataset that exposes ``num_classes``; one output for two
    classes too (the loss and top-k read a score per class). ``classes`` (the data's
    class list) is named in the message, shortened when long.
    """
    if num_classes is None or not isinstance(outputs, torch.Tensor) or outputs.ndim < 2:
        return
    width = outputs.shape[1]
    if width < num_classes:  # one score for two classes too: cross-entropy and top-k read one score per class
        named = f" ({name_list(classes)})" if classes else ""
        raise ConfigError(
            f"the data has {num_classes} classes{named} but the network outputs {width} score(s) per sample; "
            f"give the network {num_classes} outputs (e.g. model.args.num_classes={num_classes}) or train on fewer classes"
        )
