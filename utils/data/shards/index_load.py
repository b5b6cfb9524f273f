"""Loading a split's index (``load``): its arrays mapped read-only, then checked whole, once: a crafted or damaged
index is one error line naming the first bad sample (or the array that changed), before any read.

What is checked whole: each array's sha256 against ``index.json`` (a labels column shifted after packing is
caught here); each sample's shard, member count (one image, an image and a mask, or a video's frames), members
contiguous in sample order, each member's span inside its shard and its extension in the table, the label among
the classes; each key a relative path below the split (predict names its masks after the keys), each stem a plain
file name (``eval.save_predictions`` names saliency maps after them), one line per sample. These are numpy passes
and literal searches in C, no Python or regular-expression pass over every byte. The whole check then leaves a
stamp (``checked.py``), and a later load of the same, unchanged files checks only what costs nothing per sample:
``index.json``'s every field (``index.py``), the arrays' types, shapes and sizes. A member's bytes are checked
against its checksum when it is read (``reader.py``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from utils.data.shards import checked
from utils.data.shards.index import ARRAYS, INDEX, REPACK, Index, Shard, parse_header
from utils.errors import DataError
from utils.files.checksum import file_digest

# inside a line, what makes a key leave the split (a '..' part) or a stem more than a file name (a '/'); a NUL
# byte anywhere: literal searches, which run in C at memory speed (the line starts are checked with numpy)
_CLIMBS = re.compile(rb"/\.\.[/\n]")
_SLASH = re.compile(rb"/")
_NUL = re.compile(rb"\x00")
# members per sample: one image; an image and its mask; a video's frames (at least one)
COUNTS = {"classification": (1, 1), "sod": (2, 2), "video": (1, None)}

Problem = Optional[Tuple[int, str]]  # (the first bad sample, what is wrong with it)
CHUNK = 1 << 24  # bytes of a text table compared at once (a 16 MB temporary, not one as large as the table)


def check_index(index: Index, where: str) -> None:
    """A DataError naming the first problem of ``index`` (read from ``where``), or nothing."""
    samples = index.samples
    problem = _sample_problem(index) or _member_problem(index)
    if problem is None:
        problem = _lines_problem(index.keys, samples["key"], _CLIMBS, "key", "a relative path below the split")
    if problem is None and index.task == "sod":
        problem = _lines_problem(index.stems, samples["stem"], _SLASH, "stem", "a plain file name")
    if problem is not None:
        at, what = problem
        raise DataError(f"shard index '{where}' is inconsistent at sample {at} ({what}); {REPACK}")


def _first(mask: np.ndarray) -> Optional[int]:
    found = np.flatnonzero(mask)
    return int(found[0]) if len(found) else None


def _sample_problem(index: Index) -> Problem:
    samples, shards = index.samples, index.shards
    at = _first(samples["shard"] >= len(shards))
    if at is not None:
        return at, f"shard {int(samples['shard'][at])} of {len(shards)}"
    low, high = COUNTS[index.task]
    counts = samples["count"]
    at = _first((counts < low) | (counts > high if high is not None else np.zeros(len(counts), bool)))
    if at is not None:
        return (
            at,
            f"{int(counts[at])} member(s) where a {index.task} sample has {low}{'' if high == low else ' or more'}",
        )
    starts = np.cumsum(counts, dtype=np.uint64) - counts
    at = _first(samples["member"] != starts)
    if at is not None or int(starts[-1] + counts[-1] if len(counts) else 0) != len(index.members):
        return (at if at is not None else len(samples) - 1), "its members are not the rows after the previous sample's"
    per_shard = np.bincount(samples["shard"], minlength=len(shards))
    wrong = [i for i, shard in enumerate(shards) if shard.samples != per_shard[i]]
    if wrong:
        return (
            _first(samples["shard"] == wrong[0]) or 0,
            f"shard {shards[wrong[0]].name} holds {int(per_shard[wrong[0]])} samples, its index says {shards[wrong[0]].samples}",
        )
    if index.task == "sod":
        return None
    labels, classes = samples["label"], index.classes
    at = _first((labels < 0) | (labels >= len(classes) if classes is not None else np.zeros(len(labels), bool)))
    if at is not None:
        return at, f"label {int(labels[at])} of {len(classes) if classes is not None else '?'} classes"
    return None


def _member_problem(index: Index) -> Problem:
    members, samples = index.members, index.samples
    sizes = np.array([shard.bytes for shard in index.shards], dtype=np.uint64)
    shard_bytes = np.repeat(sizes[samples["shard"]], samples["count"])
    offsets, lengths = members["offset"], members["size"]
    row = _first((offsets > shard_bytes) | (lengths > shard_bytes - np.minimum(offsets, shard_bytes)))
    what = None
    if row is not None:
        what = f"a member spans bytes {int(offsets[row])} .. {int(offsets[row]) + int(lengths[row])} of a {int(shard_bytes[row])}-byte shard"
    else:
        row = _first(members["ext"] >= len(index.extensions))
        what = None if row is None else f"a member's extension {int(members['ext'][row])} of {len(index.extensions)}"
    if row is None:
        return None
    return int(np.searchsorted(samples["member"], row, side="right")) - 1, what


def _lines_problem(buffer: np.ndarray, starts: np.ndarray, bad: "re.Pattern[bytes]", field: str, rule: str) -> Problem:
    """The first sample whose ``field`` (a line of ``buffer`` starting at ``starts[i]``) is empty, ``.``, starts
    with ``/`` or with a ``..`` part, holds ``bad`` or a NUL byte; or whose lines are not one per sample."""
    count = len(starts)
    if count == 0:
        return None if len(buffer) == 0 else (0, f"{field}s for no sample")
    lines = sum(int(np.count_nonzero(buffer[at : at + CHUNK] == 10)) for at in range(0, len(buffer), CHUNK))
    nexts = starts[1:].astype(np.int64)
    one_each = (
        lines == count
        and buffer[-1] == 10
        and starts[0] == 0
        and bool(np.all(starts[1:] > starts[:-1]))
        and bool(np.all(buffer[nexts - 1] == 10))
    )
    if not one_each:
        return 0, f"its {field}s are not one line per sample"
    first = starts.astype(np.int64)
    last = len(buffer) - 1

    def byte(k: int) -> np.ndarray:  # each line's byte k (a line's own newline stands for any beyond its end)
        return buffer[np.minimum(first + k, last)]

    one, two, three = byte(0), byte(1), byte(2)
    dots = (one == 46) & ((two == 10) | ((two == 46) & ((three == 47) | (three == 10))))  # '.', '..', '../'
    wrong = (one == 47) | (one == 10) | dots  # absolute, empty
    at = _first(wrong)
    for search in (bad, _NUL):
        match = search.search(memoryview(buffer))
        if match is not None:
            found = int(np.searchsorted(starts, match.start(), side="right")) - 1
            at = found if at is None else min(at, found)
    if at is None:
        return None
    end = int(starts[at + 1]) - 1 if at + 1 < count else len(buffer) - 1
    text = bytes(buffer[int(starts[at]) : end]).decode("utf-8", "surrogateescape")
    return at, f"{field} {text!r} is not {rule}"


def _check_digests(index: Index, files: Dict[str, Path], where: str, hashed: bool) -> str:
    """A DataError naming the first array whose bytes do not match its sha256 in ``index.json`` (unless
    ``hashed``: checked as they arrived); the sha256 of the keys' lines, the data's fingerprint, which the stamp
    keeps so that no start hashes them again (``utils/data/identity.py``)."""
    for name, path in files.items() if not hashed else ():
        if file_digest(path) != index.header.arrays[name].sha256:
            raise DataError(
                f"index array '{path}' does not match its sha256 in {INDEX} '{where}' (changed since packing: its "
                f"{name} would be read wrong); restore it or {REPACK}"
            )
    return hashlib.sha256(np.ascontiguousarray(index.keys)).hexdigest()


def load(text: bytes, where: str, path_of: Callable[[Shard], Path], hashed: bool = False) -> Index:
    """The index whose ``index.json`` is ``text`` (read from ``where``), its arrays mapped from ``path_of(file)``
    (the split's folder, or a verified copy of a remote one: ``hashed``, the cache checked its sha256 as it
    arrived); checked whole before any sample is read, unless a stamp shows these very files were (``checked.py``)."""
    header = parse_header(text, where)
    arrays, files = {}, {}
    for name, dtype in ARRAYS.items():
        file = header.arrays[name]
        path = path_of(file)
        try:
            if path.exists() and not path.is_file():  # a handed pack's FIFO would block the read for ever
                raise OSError("not a regular file: a folder, FIFO or device")
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            size = path.stat().st_size
        except (OSError, ValueError) as err:
            raise DataError(f"index array '{path}' of '{where}' cannot be read ({err}); {REPACK}") from err
        if not isinstance(array, np.ndarray) or array.dtype != dtype or array.ndim != 1 or size != file.bytes:
            raise DataError(f"index array '{path}' of '{where}' is not the {name} array its index names; {REPACK}")
        arrays[name], files[name] = array, path
    index = Index(header, arrays)
    if len(index.samples) != header.count:
        raise DataError(
            f"shard index '{where}' has {len(index.samples)} sample rows for {header.count} samples; {REPACK}"
        )
    found = checked.facts(text, files)  # before the check: a file changed meanwhile then matches no stamp
    known = checked.proven(found)
    if known is None:
        known = {"keys_sha256": _check_digests(index, files, where, hashed)}
        check_index(index, where)
        known["label_count"] = _label_count(index)
        checked.stamp(found, known)
    keys_sha256, count = known.get("keys_sha256"), known.get("label_count")
    index.digest = found["index"] if found is not None else hashlib.sha256(text).hexdigest()
    index.keys_sha256 = keys_sha256 if isinstance(keys_sha256, str) else None
    index.label_count = len(index.classes) if index.classes is not None else count if isinstance(count, int) else None
    return index


def _label_count(index: Index) -> Optional[int]:
    """How many classes the labels of an index without class names span (its largest label + 1), so that the
    network is held to cover them (``utils/engine/input_check.py``) as it is a folder's classes; None otherwise."""
    labels = index.samples["label"]
    if index.classes is not None or index.task == "sod" or not len(labels):
        return None
    return int(labels.max()) + 1


def check_packed(folder: Path) -> None:
    """A split ``--mode pack`` just wrote into ``folder``, checked whole and stamped as a start would, its arrays'
    sha256 taken as the writer computed them from these files a moment ago (``writer.finish``): the first start
    from a fresh pack then trusts its stamp, as the next ones do."""
    where = str(folder / INDEX)
    load((folder / INDEX).read_bytes(), where, lambda file: folder / file.name, hashed=True)
