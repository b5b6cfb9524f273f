"""What the tests of packs share: packing through main.py, and reading or crafting a packed split's index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import main
from utils.files.checksum import file_digest


def pack(capsys, output: Path, *overrides: str) -> str:
    assert main.main(["--mode", "pack", "--output", str(output), *overrides]) == 0
    return capsys.readouterr().out


def load_split(folder: Path):
    """A packed split's index as the readers load it."""
    from utils.data.shards.index_load import load

    return load((folder / "index.json").read_bytes(), str(folder), lambda file: folder / file.name)


def craft(folder: Path, change) -> None:
    """``change(arrays, header)`` applied to a packed split's index (copies of its arrays, its JSON), written back
    with each array's size and sha256 made to match, as whoever crafts an index would."""
    header = json.loads((folder / "index.json").read_text())
    arrays = {name: np.load(folder / f"{name}.npy") for name in ("samples", "members", "keys", "stems")}
    change(arrays, header)
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array, allow_pickle=False)
        header["arrays"][name]["bytes"] = (folder / f"{name}.npy").stat().st_size
        header["arrays"][name]["sha256"] = file_digest(folder / f"{name}.npy")
    (folder / "index.json").write_text(json.dumps(header))


def set_text(arrays, table: str, field: str, at: int, text: str) -> None:
    """Sample ``at``'s key (or stem) set to ``text``: the table's lines rebuilt, and every sample's offset."""
    lines = bytes(arrays[table]).decode().split("\n")[:-1]
    lines[at] = text
    arrays[table] = np.frombuffer("".join(f"{line}\n" for line in lines).encode(), np.uint8)
    arrays["samples"][field] = np.cumsum([0] + [len(line.encode()) + 1 for line in lines[:-1]])
