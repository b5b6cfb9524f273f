"""Bad input found by the first forward pass: a channel mismatch between the data and the network."""

from __future__ import annotations

import re

from utils.errors import ConfigError

_CHANNELS = re.compile(r"expected input\[([^\]]*)\] to have (\d+) channels, but got (\d+) channels")


def input_error(err: RuntimeError) -> Exception:
    """A first-batch channel mismatch as a ConfigError saying what to change; other errors unchanged."""
    match = _CHANNELS.search(str(err))
    if not match:
        return err
    return ConfigError(
        f"the data has {match.group(3)} channel(s) per input but the network's first layer expects {match.group(2)}; "
        "set the backbone's in_channels (e.g. model.args.backbone_args={in_channels: " + match.group(3) + "}) or change the data"
    )
