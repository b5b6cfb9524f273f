"""The network's shape from the data: what a folder of images, masks or video frames says of itself (its number of
classes, a sample's channels and size) is what the network is built for, unless the config says otherwise.

``python main.py data.name=image_folder data.root=DIR`` on a folder of 2-class 20x20 RGB images needed
``model.input_size``, then the backbone's ``in_channels`` typed by hand (one error at a time), and its head kept the
default 10 classes without a word. For the datasets of ``FROM_DATA`` (folders or packs), a key the ``--config``
file and the overrides leave out (``utils/config/given.py``) is taken from the data, after the data is built and
before the network is: ``model.args.num_classes`` (the train split's classes), the channels (``model.args.in_channels``, or
``model.args.backbone_args.in_channels`` for a network that builds a backbone by name) and ``model.input_size``
(the val split's first sample after ``data.eval_transforms``), for a network whose constructor takes them
(docs/plugins.md: a plugin says so by its argument names). The values taken are logged once and saved in the run's
config.yaml, which test, predict and export read back. Images of several sizes without a resize are resized to the
most common size read, or are one error line naming the sizes and the setting to add, and a folder of grey images
gives the network one channel (``settle_images``).

A value the config sets that contradicts the data is one line (``check_classes``): one score per sample on two
classes is an error, more scores than classes a warning naming both.
"""

from __future__ import annotations

import collections
import inspect
import logging
from typing import Any, Dict, FrozenSet, Mapping, Optional, Sequence, Tuple

from utils.config.given import is_given
from utils.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# transforms that give every sample one size (or at least bring a mixed folder to one): no size is chosen for them
SIZING_TRANSFORMS = ("Resize", "Crop")
# files whose header is read to tell whether a folder's images share one size: enough to see a mix, cheap on any folder
SIZE_PROBES = 64


def _parameters(obj: Any) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(obj).parameters
    except (TypeError, ValueError):  # no signature to read: nothing is known to be taken
        return {}


def channel_keys(args: Mapping[str, Any], network: Any) -> Tuple[str, ...]:
    """The keys that give the network its input channels: ``model.args.in_channels`` when it takes them, else
    ``model.args.backbone_args.in_channels`` (and timm's ``in_chans``) when it builds a backbone by name that
    takes them; none for a network that takes neither."""
    from utils.registry import BACKBONES

    takes = _parameters(network)
    own = ("model.args.in_channels", "model.args.backbone_args.in_channels")
    if "in_channels" in takes:
        return own
    if "backbone_args" not in takes or "backbone" not in takes:
        return ()
    name = args.get("backbone", takes["backbone"].default)
    if not isinstance(name, str) or name not in BACKBONES or "in_channels" not in _parameters(BACKBONES.get(name)):
        return ()
    return own[1:] + ("model.args.backbone_args.in_chans",)


def _set(args: Dict[str, Any], key: str, value: Any) -> None:
    """Set ``model.args.<a>.<b>`` in ``args`` (``cfg.model.args``), making the mappings on the way."""
    node = args
    *above, last = key.split(".")[2:]
    for name in above:
        node[name] = dict(node.get(name) or {})
        node = node[name]
    node[last] = value


def fill_from_data(
    cfg: Any, given: FrozenSet[str], train: Any, sample: Any, settled: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """Set in ``cfg`` what the config leaves out and the data says: the number of classes of ``train``, the channels
    and the shape of ``sample`` (the val split's first input, or None), each where the network takes it; the keys set
    and their values, logged once with those ``settle_images`` set (``settled``)."""
    from utils.registry import NETWORKS

    network = NETWORKS.get(cfg.model.name)
    args = cfg.model.args = dict(cfg.model.args)
    filled: Dict[str, Any] = dict(settled or {})
    classes = getattr(train, "num_classes", None)
    if classes and "num_classes" in _parameters(network) and not is_given(given, "model.args.num_classes"):
        filled["model.args.num_classes"] = int(classes)
    if sample is not None:
        keys = channel_keys(args, network)
        if keys and not any(is_given(given, key) for key in keys):
            filled[keys[0]] = int(sample.shape[0])
        if cfg.model.input_size is None:  # left out (load_config), or null: the data's
            cfg.model.input_size = filled["model.input_size"] = [int(n) for n in sample.shape]
    for key, value in filled.items():
        if key.startswith("model.args.") and key not in (settled or {}):
            _set(args, key, value)
    if filled:
        log.info(
            "from the data '%s': %s (saved in the run's config.yaml; set a key to choose it)",
            cfg.data.name,
            ", ".join(f"{key}={value}" for key, value in filled.items()),
        )
    return filled


def check_classes(cfg: Any, num_classes: Optional[int], names: Optional[Sequence[Any]]) -> None:
    """``model.args.num_classes`` against the data's ``num_classes`` (classification and video): one score for two
    classes is a ConfigError (cross-entropy and top-k read one score per class), more scores than classes a
    warning naming both; fewer fail at the first batch (``utils/engine/input_check.py``), for any network."""
    outputs = cfg.model.args.get("num_classes") if isinstance(cfg.model.args, dict) else None
    if not num_classes or not isinstance(outputs, int) or cfg.eval.metric not in ("classification", "video"):
        return
    named = f" ({', '.join(map(str, names[:8]))}{', ...' if len(names) > 8 else ''})" if names else ""
    if outputs == 1 and num_classes == 2:
        # cross-entropy reads one score per class, bce_with_logits one logit: name the loss only where it is the cause
        scored = sorted({spec.get("name", "?") for spec in cfg.loss if isinstance(spec, dict)} & {"cross_entropy"})
        loss = f"the loss ({scored[0]}) and " if scored else ""
        raise ConfigError(
            f"model.args.num_classes=1 gives one score per sample, but the data has 2 classes{named}: {loss}"
            f"eval.metric={cfg.eval.metric} (top-k, the confusion matrix) read one score per class; set "
            "model.args.num_classes=2, or leave it out (the data decides)"
        )
    if outputs > num_classes:
        log.warning(
            "model.args.num_classes=%d, but the data has %d classes%s: %d of the network's scores belong to no "
            "class, and top-k counts them; set model.args.num_classes=%d, or leave it out (the data decides)",
            outputs,
            num_classes,
            named,
            outputs - num_classes,
            num_classes,
        )


def _resizes(cfg: Any) -> bool:
    """Whether the config brings the images to one size itself: ``data.args.image_size`` or a resize or crop in
    both transform lists."""
    if cfg.data.args.get("image_size"):
        return True
    lists = (cfg.data.train_transforms, cfg.data.eval_transforms)
    return all(
        any(any(word in str(spec.get("name", "")) for word in SIZING_TRANSFORMS) for spec in ops) for ops in lists
    )


GREY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "I;16N", "F"})  # PIL's one-channel modes


def image_headers(paths: Sequence[str]) -> Tuple["collections.Counter[Tuple[int, int]]", FrozenSet[str]]:
    """How many of ``paths`` have each (width, height), and the PIL modes they are stored in, from the headers."""
    from PIL import Image

    sizes: "collections.Counter[Tuple[int, int]]" = collections.Counter()
    modes = set()
    for path in paths:
        try:
            with Image.open(path) as image:
                sizes[image.size] += 1
                modes.add(image.mode)
        except (OSError, ValueError, Image.DecompressionBombError):  # an unusable file: the dataset's own rule reads it
            continue
    return sizes, frozenset(modes)


def _channels_free(cfg: Any, given: FrozenSet[str]) -> bool:
    """Whether nothing in the config says how many channels the network takes: ``data.args.channels``,
    ``model.input_size`` and the network's channel keys are all left out."""
    from utils.registry import NETWORKS

    keys = ("data.args.channels", *channel_keys(cfg.model.args, NETWORKS.get(cfg.model.name)))
    return cfg.model.input_size is None and not any(is_given(given, key) for key in keys)


def settle_images(cfg: Any, given: FrozenSet[str], train: Any) -> Dict[str, Any]:
    """``image_folder`` files, read by their headers (``SIZE_PROBES`` of the train split) while the data decides
    the network's shape: ``data.args.channels=1`` for a folder of grey images unless the config says how many
    channels the network takes; and for
    images of several sizes with nothing in the config to resize them, ``data.args.image_size`` set to the most
    common size when it is square, else a DataError naming the sizes and the setting to add. The ``data.args``
    keys set and their values (when any: build the data again)."""
    if cfg.data.name != "image_folder" or not len(train) or train.source.file(0) is None:  # a pack: no files
        return {}
    if cfg.data.loader == "dali":  # DALI decodes RGB and sizes data.args.image_size itself (utils/data/dali.py)
        return {}
    step = max(1, len(train) // SIZE_PROBES)
    sizes, modes = image_headers([train.source.file(at) for at in range(0, len(train), step)][:SIZE_PROBES])
    settled: Dict[str, Any] = {}
    if modes and modes <= GREY_MODES and _channels_free(cfg, given):
        cfg.data.args = {**cfg.data.args, "channels": 1}
        settled["data.args.channels"] = 1
    if len(sizes) < 2 or cfg.model.input_size is not None or is_given(given, "data.args.image_size") or _resizes(cfg):
        return settled
    seen = ", ".join(f"{w}x{h} ({n})" for (w, h), n in sizes.most_common(4)) + (", ..." if len(sizes) > 4 else "")
    (width, height), _ = sizes.most_common(1)[0]
    if width != height:
        raise DataError(
            f"the images of the train split differ in size ({seen} of {sum(sizes.values())} read, width x height); "
            f"give them one size: data.args.image_size=N (a square resize), or a Resize in data.train_transforms "
            f"and data.eval_transforms (e.g. [{{name: Resize, size: [{height}, {width}]}}])"
        )
    cfg.data.args = {**cfg.data.args, "image_size": width}
    settled["data.args.image_size"] = width
    log.warning(
        "the images of the train split differ in size (%s of %d read, width x height): each is resized to %dx%d, "
        "the most common (data.args.image_size=%d; set it, or a Resize, to choose)",
        seen,
        sum(sizes.values()),
        width,
        width,
        width,
    )
    return settled
