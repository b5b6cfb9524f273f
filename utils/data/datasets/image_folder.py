"""Class-per-folder images: ``<root>/<split>/<class>/<image>`` (ImageNet layout), or a pack of them.

The samples come from a source (``utils/data/sources/``): the class folders (``class_folders.py``: one class
list for every split, the train split's class folders or ``classes``, i.e. ``data.args.classes`` or the list
a checkpoint saved in test mode) or a pack of them. Images are read as stored (``utils/data/images.py``).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union

import torch
from torch.utils.data import default_collate

from utils.config.arguments import Count
from utils.data.bad_samples import BadSamples
from utils.data.batch import check_one_size
from utils.data.crop_decode import Decoded, crop_reader
from utils.data.images import as_float, check_channels
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.class_folders import ClassFolders
from utils.data.sources.dataset import SourceDataset
from utils.data.sources.open import open_source
from utils.data.sources.pack import PackArgs
from utils.data.transforms import pixels_then_floats, split_at_float
from utils.errors import ConfigError
from utils.registry import DATASETS

RESIZE_FIX = "data.args.image_size=N, or a Resize / RandomResizedCrop in data.train_transforms and a Resize + CenterCrop in data.eval_transforms"


@DATASETS.register("image_folder")
class ImageFolder(SourceDataset):
    """Images as float tensors ``[channels, H, W]`` in [0, 1], read as stored.

    ``channels`` (3 by default) is how many the network gets: grey images are
    repeated into 3 equal channels, or colour turned into luma for 1. A missing
    split folder is an error (``data.test_split`` picks the folder testing reads).
    An unusable image (truncated, not an image, a decompression bomb, values out
    of range) stops the run with its path (``on_bad_sample="stop"``), or is
    replaced by the next usable one with a warning per file (``"skip"``, i.e.
    ``data.args={on_bad_sample: skip}``). Images of different sizes that reach
    one batch are an error naming two of them and the resize to add.

    The sample list is two arrays that loader workers share: ``keys``, a table of the
    paths relative to the split folder (``utils/data/string_table.py``), and ``labels``;
    ``path(i)`` and ``label(i)`` read them.

    ``decode_for_crop`` (on by default): a JPEG whose transforms start with ``RandomResizedCrop`` or a resize
    is decoded at the size they need (``utils/data/crop_decode.py``); false decodes every image whole.
    """

    SIZING = ("image_size", "first")  # --mode predict: resized to data.args.image_size before the eval transforms
    task = "classification"  # the eval.metric its samples are for (utils/data/input_shape.py: check_task)

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        image_size: Optional[Count] = None,
        on_bad_sample: Literal["stop", "skip"] = "stop",
        classes: Optional[Sequence[str]] = None,
        channels: int = 3,
        cache_limit: Union[int, str] = DEFAULT_CACHE_LIMIT,
        cache_dir: Optional[str] = None,
        shuffle_window: Optional[Count] = None,
        decode_for_crop: bool = True,
    ) -> None:
        self.bad_samples = BadSamples(on_bad_sample, "image_folder")
        self.channels = check_channels(channels, "image_folder")
        if root is None:
            raise ConfigError("dataset image_folder needs data.root=<folder with train/ and val/ inside>")
        pack = PackArgs(cache_limit, cache_dir, shuffle_window)
        files = partial(ClassFolders, Path(root), split, classes)
        self.source = open_source(root, split, self.task, pack, files, "image_folder", classes)
        self.root, self.keys, self.labels = self.source.where, self.source.keys, self.source.labels
        self.classes, self.num_classes = self.source.classes, self.source.num_classes
        from torchvision.transforms import v2  # here, not at import: torchvision costs about 1 s

        self.resize = v2.Resize((image_size, image_size), antialias=True) if image_size else None
        self.transform = transform
        self.for_crop = crop_reader(transform, self.resize) if decode_for_crop and not self.source.in_memory else None
        self.uint8_items = False  # the train loader's choice (batches_of_uint8)
        self._first_of_shape: Dict[Tuple[int, ...], str] = {}  # this process's first file of each tensor shape

    def path(self, index: int) -> str:
        """The file of sample ``index`` (of a pack: its name, ``<split url>:<key>``)."""
        return self.source.name_of(index)

    def label(self, index: int) -> int:
        """The class index of sample ``index``."""
        return int(self.labels[index])

    def _read(self, at: int) -> Tuple[Decoded, int, str]:
        path = self.path(at)
        if self.for_crop is not None:
            data, ext = self.source.image_bytes(at)
            if ext != "npy":
                return self.for_crop.read(data, path, self.channels), self.label(at), path
        return Decoded(self.source.image(at, self.channels), False), self.label(at), path

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        (values, cropped, _), label, path = self.bad_samples.first_usable(index, len(self), self._read, str(self.root))
        if self.source.in_memory:  # an in-memory dataset's tensor, as it gave it
            return (values if self.transform is None else self.transform(values)), label
        if cropped:  # its RandomResizedCrop applied while decoding
            image = pixels_then_floats(values, None, self.for_crop.rest, not self.uint8_items)
        else:
            image = pixels_then_floats(values, self.resize, self.transform, not self.uint8_items)
        self._first_of_shape.setdefault(tuple(image.shape), path)
        return image, label

    def batches_of_uint8(self) -> bool:
        """Asked by the loader (utils/data/loader.py): when nothing after the transforms on pixels needs floats, items keep 8-bit
        values (4x fewer bytes through the workers) and the loader turns whole batches into floats
        (``utils/data/prefetch.py``: ``Normalize``). True when they do from now on."""
        self.uint8_items = not self.source.in_memory and split_at_float(self.transform)[1] is None
        return self.uint8_items

    def collate_fn(self, batch: List[Tuple[torch.Tensor, int]]) -> List[torch.Tensor]:
        """``default_collate``, or a DataError naming two files whose images differ in size."""
        check_one_size(
            [(self._first_of_shape.get(tuple(image.shape), "?"), image.shape) for image, _ in batch], RESIZE_FIX
        )
        if len({image.dtype for image, _ in batch}) > 1:  # 8-bit items beside 16-bit ones (floats): floats all
            batch = [(as_float(image), label) for image, label in batch]
        return default_collate(batch)

    collate_fn.collates_new_tensors = True  # default_collate's new batch: the loader may normalize it in place
