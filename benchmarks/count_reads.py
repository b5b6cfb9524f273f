"""Run ``main.py`` once and count the host reads and Python-level collectives made from the project's own files.

``python benchmarks/count_reads.py OUT.json [main.py arguments]`` (also under
``torchrun``: every rank writes ``OUT.json`` with its rank appended). What counts
is said in ``utils/host_reads.py``, which the tests of the training loop use too.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path
from typing import Counter, List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from utils.host_reads import counting  # noqa: E402


def main(argv: List[str]) -> int:
    out, args = argv[0], argv[1:]
    import main as entry

    counts: Counter = collections.Counter()
    with counting(counts):
        code = entry.main(args)
    rank = os.environ.get("RANK")
    path = out if rank is None else f"{out}.rank{rank}"
    Path(path).write_text(json.dumps({"exit": code, "sites": dict(counts)}))
    return code


if __name__ == "__main__":
    import main as entry

    entry.end(main(sys.argv[1:]))  # under torchrun without the interpreter's teardown (see there)
