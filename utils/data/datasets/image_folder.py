"""Class-per-folder images: ``<root>/<split>/<class>/<image>`` (ImageNet layout).

One class list for every split: the train split's class folders (sorted), or
``classes`` (``data.args.classes``, or the list a checkpoint saved, in test
mode). A val/test class folder that the list lacks is an error naming it; a
class missing from val/test keeps its index (a warning names it); an empty class
folder is an error. Hidden and debris names (``utils/data/folders.py``) are
never classes or images. Symlinked folders are followed, but each real
directory is read once per class, so a link back up the tree does not loop.
Images are read as stored (``utils/data/images.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from utils.config.arguments import Count
from utils.data.bad_samples import BadSamples
from utils.data.batch import check_one_size
from utils.data.crop_decode import Decoded, crop_reader
from utils.data.folders import subfolders, warn_missing_classes
from utils.data.images import as_float, check_channels, file_bytes, read_pixels
from utils.data.samplers import WindowOrder
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.class_folders import IMG_EXTENSIONS, scan
from utils.data.sources.pack import PACK_INERT, PackArgs, check_folders, open_packed
from utils.data.string_table import StringTable
from utils.data.transforms import pixels_then_floats, split_at_float
from utils.errors import ConfigError, DataError
from utils.registry import DATASETS

RESIZE_FIX = "data.args.image_size=N, or a Resize / RandomResizedCrop in data.train_transforms and a Resize + CenterCrop in data.eval_transforms"


@DATASETS.register("image_folder")
class ImageFolder(Dataset):
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
    INERT_ARGS = PACK_INERT  # data.args a resume may change (utils/checkpoint/guard.py)
    task = "classification"  # the eval.metric its samples are for (utils/data/input_shape.py: check_task)
    check_folders = staticmethod(check_folders)  # a remote pack's cache folder, checked before a run folder is made

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
        self.packed = open_packed(root, split, "classification", pack, "image_folder")
        if self.packed is not None:  # a pack: the index's keys, labels and classes
            self.root, self.keys, self.labels = self.packed.where, self.packed.key_table(), self.packed.labels
            self.classes = self.packed.classes(classes)
        else:
            self._scan(Path(root), split, classes)
        self.num_classes = len(self.classes) if self.classes is not None else getattr(self.packed, "num_classes", 0)
        from torchvision.transforms import v2  # here, not at import: torchvision costs about 1 s

        self.resize = v2.Resize((image_size, image_size), antialias=True) if image_size else None
        self.transform = transform
        in_memory = self.packed is not None and self.packed.in_memory
        self.for_crop = crop_reader(transform, self.resize) if decode_for_crop and not in_memory else None
        self.uint8_items = False  # the train loader's choice (batches_of_uint8)
        self._first_of_shape: Dict[Tuple[int, ...], str] = {}  # this process's first file of each tensor shape

    def _scan(self, root: Path, split: str, classes: Optional[Sequence[str]]) -> None:
        self.root = folder = self._split_folder(root, split)
        self.classes = self._class_list(root, folder, classes)
        self.keys, self.labels = scan(folder, self.classes)
        if not len(self.keys):
            raise DataError(
                f"data folder '{folder}' holds no images (looked for {', '.join(IMG_EXTENSIONS)} under {folder}/<class>/)"
            )
        warn_missing_classes(folder, self.classes, {self.classes[label] for label in np.unique(self.labels)})
        self._prefix = os.path.join(str(folder), "")  # + a key: the path the scan found

    @staticmethod
    def _split_folder(root: Path, split: str) -> Path:
        folder = root / split
        if not folder.is_dir():
            hint = (
                "; data.test_split names the split folder that testing reads (e.g. data.test_split=val)"
                if split not in ("train", "val")
                else ""
            )
            raise DataError(f"data folder '{folder}' does not exist; expected <root>/{split}/<class>/<image>{hint}")
        return folder

    @staticmethod
    def _class_list(root: Path, folder: Path, classes: Optional[Sequence[str]]) -> List[str]:
        """``classes`` when given, else the train split's class folders (the split's own when train is absent)."""
        own = subfolders(folder)
        if classes is None:
            train = root / "train"
            classes = subfolders(train) if train.is_dir() else own
            if not classes:
                raise DataError(
                    f"data folder '{train if train.is_dir() else folder}' holds no images: it has no class folders; expected <root>/<split>/<class>/<image>"
                )
        unknown = [name for name in own if name not in classes]
        if unknown:
            raise DataError(
                f"class folder(s) {unknown} in '{folder}' are not classes of the training split ({', '.join(classes)}); "
                "remove them, add them to the train split, or list every class in data.args.classes"
            )
        return list(classes)

    def __len__(self) -> int:
        return len(self.keys)

    def key_table(self) -> StringTable:
        """Each image's path relative to the split folder (``<class>/<file>``): the data's identity, whatever the root."""
        return self.keys

    def sample_keys(self) -> List[str]:
        """The keys as a list."""
        return self.keys.tolist()

    def path(self, index: int) -> str:
        """The file of sample ``index`` (of a pack: its name, ``<split url>:<key>``)."""
        return self.packed.name_of(index) if self.packed is not None else self._prefix + self.keys[index]

    def label(self, index: int) -> int:
        """The class index of sample ``index``."""
        return int(self.labels[index])

    def _read(self, at: int) -> Tuple[Decoded, int, str]:
        path = self.path(at)
        if self.for_crop is not None:
            if self.packed is not None:
                data, ext = self.packed.image_bytes(at)
                if ext == "npy":
                    return Decoded(self.packed.image(at, self.channels), False), self.label(at), path
            else:
                data = file_bytes(path, f"image '{path}'", "fix or remove the file")
            return self.for_crop.read(data, path, self.channels), self.label(at), path
        if self.packed is not None:
            return Decoded(self.packed.image(at, self.channels), False), self.label(at), path
        return Decoded(read_pixels(path, self.channels), False), self.label(at), path

    def window_order(self) -> Optional[WindowOrder]:
        """A pack's shard-window order (``data.args.shuffle_window``); None for files (a shuffle of the split)."""
        return self.packed.window_order() if self.packed is not None else None

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        (values, cropped, _), label, path = self.bad_samples.first_usable(index, len(self), self._read, str(self.root))
        if self.packed is not None and self.packed.in_memory:  # an in-memory dataset's tensor, as it gave it
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
        in_memory = self.packed is not None and self.packed.in_memory
        self.uint8_items = not in_memory and split_at_float(self.transform)[1] is None
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
