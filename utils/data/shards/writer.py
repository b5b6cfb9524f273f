"""Writing one split as tar shards (``tarfile``, WebDataset's layout: members ``<n>.<ext>`` per sample)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from utils.data.shards.index import INDEX, Index, Shard
from utils.errors import OutputError
from utils.file_hash import file_digest


class SplitWriter:
    """Adds samples to ``<folder>/shard-NNNNNN.tar`` files of about ``shard_size`` bytes each; ``close()``
    writes ``index.json`` last, so a split folder with an index is a complete one."""

    def __init__(self, folder: Path, split: str, shard_size: int) -> None:
        self.folder, self.split, self.shard_size = folder, split, shard_size
        self.shards: List[Shard] = []
        self.samples: List[Dict[str, Any]] = []
        self.positions: List[int] = []
        self._tar: Optional[tarfile.TarFile] = None
        self._count = 0

    def add(self, members: Dict[str, bytes], entry: Dict[str, Any], position: int) -> None:
        """One sample: its members (``ext -> bytes``), its index entry (key, label or mask member, ...) and its
        place in the index (the dataset's order, whatever order the shards are written in)."""
        with _written(self.folder):
            self._add(members, entry, position)

    def _add(self, members: Dict[str, bytes], entry: Dict[str, Any], position: int) -> None:
        if self._tar is not None and self._tar.offset >= self.shard_size:
            self._close_shard()
        if self._tar is None:
            name = f"shard-{len(self.shards):06d}.tar"
            self.folder.mkdir(parents=True, exist_ok=True)  # here: a dataset that cannot be packed leaves no folder
            # the tar's own header blocks carry no time or user: the same data packs to the same bytes
            self._tar = tarfile.open(self.folder / name, "w", format=tarfile.PAX_FORMAT)
            self._count = 0
        stem = f"{len(self.samples):09d}"
        spans = {}
        for ext, data in members.items():
            info = tarfile.TarInfo(f"{stem}.{ext}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            self._tar.addfile(info, io.BytesIO(data))
            padded = -(-len(data) // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
            # the data follows its header; its own checksum lets a sample read by byte range be checked alone
            spans[f"{stem}.{ext}"] = [self._tar.offset - padded, len(data), hashlib.sha256(data).hexdigest()[:16]]
        names: Dict[str, Any] = {field: f"{stem}.{entry[field]}" for field in ("image", "mask") if field in entry}
        if "frames" in entry:  # a video's frames in order: ext -> member, as for image and mask
            names["frames"] = [f"{stem}.{ext}" for ext in entry["frames"]]
        self.samples.append({**entry, **names, "shard": len(self.shards), "members": spans})
        self.positions.append(position)
        self._count += 1

    def _close_shard(self) -> None:
        assert self._tar is not None
        self._tar.close()
        path = Path(self._tar.name)  # type: ignore[arg-type]
        self.shards.append(Shard(path.name, self._count, file_digest(path), path.stat().st_size))
        self._tar = None

    def close(self, task: str, dataset: str, classes: Optional[List[Any]]) -> Index:
        """Finishes the last shard and writes the split's index; the index."""
        with _written(self.folder):
            if self._tar is not None:
                self._close_shard()
            samples = [sample for _, sample in sorted(zip(self.positions, self.samples), key=lambda pair: pair[0])]
            index = Index(self.split, task, dataset, classes, self.shards, samples)
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self.folder / (INDEX + ".tmp")
            tmp.write_text(index.to_json())
            os.replace(tmp, self.folder / INDEX)
        return index


@contextlib.contextmanager
def _written(folder: Path) -> Iterator[None]:
    """An OSError while writing into ``folder`` (a full disk, a folder pack may not write) as one error line naming it."""
    try:
        yield
    except OSError as err:
        raise OutputError.writing(folder, err, "pack again into a new or empty --output") from err
