"""A run's ``metrics.jsonl``: one JSON object a line, a row per evaluation (``split``, ``epoch``, ``step``, the
metric values). The one module that writes and reads it; each reader picks its policy by name:

- ``append``: the run writer adds a row (one line, written whole with its newline);
- ``read_strict``: files others made (``--mode compare``): a line that is no JSON object, or longer than any
  row, is one DataError naming the file and the line; only a last line cut short (no newline, not JSON: the
  run was killed while writing it) is left out, with a warning;
- ``read_lenient``: a run's own file (the run writer, a sweep's runs): a line that is no JSON object is
  skipped with a warning naming the file, as ``rewind`` drops it when the run resumes;
- ``rewind``: a resumed run keeps the rows up to its checkpoint's step and drops lines that are no JSON
  object (a row cut short by a crash or a full disk), rewriting the file whole.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from utils.errors import DataError, OutputError
from utils.files.owned import open_file, write_text

log = logging.getLogger(__name__)

Row = Dict[str, Any]
MAX_LINE = 1 << 20  # characters of a line: a row is some hundred
_NOT_JSON = "%s: %d line(s) are not JSON (cut short by a crash or a full disk); %s"


def append(path: Path, row: Row) -> None:
    """Add ``row`` as the file's last line; OutputError naming the file when the disk refuses."""
    try:
        with open_file(path.parent, path, "a") as fh:  # never through a link (utils/files/owned.py)
            fh.write(json.dumps(row) + "\n")
    except OSError as err:
        raise OutputError.writing(path, err) from err


def read_strict(path: Path, alternative: str = "") -> List[Tuple[int, Row]]:
    """The rows of ``path`` (none without the file), each with its line number. A last line cut short is left out
    with a warning; any other line that is no JSON object, a line over ``MAX_LINE`` characters or a file that
    cannot be read is a DataError naming the file (and the line) and the fix, then ``alternative`` (what else
    the reader's user may do: compare's, leave that run out)."""
    if not path.is_file():
        return []
    other = f", or {alternative}" if alternative else ""
    fix = f"repair or remove that line{other}"
    rows = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(MAX_LINE + 1), ""), start=1):
                if not line.strip():
                    continue
                if len(line) > MAX_LINE:
                    raise DataError(
                        f"'{path}' line {number} is longer than {MAX_LINE:,} characters, which no metrics row is; {fix}"
                    )
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError) as err:  # RecursionError: arrays nested past the parser's depth
                    if not line.endswith("\n"):  # the last line, cut short
                        log.warning(
                            "'%s' line %d was cut short (the run stopped while writing it); it is left out",
                            path,
                            number,
                        )
                        break
                    raise DataError(
                        f"'{path}' line {number} is not a JSON object ({err}): {line[:80]!r}; {fix}"
                    ) from None
                if not isinstance(row, dict):
                    raise DataError(f"'{path}' line {number} is not a JSON object: {line[:80].rstrip()!r}; {fix}")
                rows.append((number, row))
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(
            f"cannot read '{path}' ({getattr(err, 'strerror', None) or err}); make it readable{other}"
        ) from err
    return rows


def read_lenient(path: Path) -> List[Row]:
    """The rows of ``path`` (none without the file); a line that is no JSON object is skipped with a warning."""
    if not path.is_file():
        return []
    lines = list(_lines(path))
    rows = [row for _, row in lines if row is not None]
    if len(rows) != len(lines):
        log.warning(_NOT_JSON, path, len(lines) - len(rows), "skipped")
    return rows


def rewind(path: Path, step: int) -> List[Row]:
    """A resumed run's file: the rows of steps up to ``step`` kept (rows without a step, of older versions, too),
    every later row and every line that is no JSON object dropped (a warning names the file), the file rewritten
    whole when anything was dropped (OutputError when the disk refuses). Returns the rows kept."""
    if not path.is_file():
        return []
    lines = list(_lines(path))
    damaged = sum(row is None for _, row in lines)
    if damaged:
        log.warning(_NOT_JSON, path, damaged, "dropped")
    kept = [(line, row) for line, row in lines if row is not None and row.get("step", -1) <= step]
    if len(kept) != len(lines):
        write_text(path.parent, path, "".join(line + "\n" for line, _ in kept), "resume with --resume")
    return [row for _, row in kept]


def _lines(path: Path) -> Iterator[Tuple[str, Optional[Row]]]:
    """Each line that is not blank (without its newline), with its row: None for a line that is no JSON object."""
    # bytes that are not UTF-8 (a file damaged or altered) make their line no JSON object, never a traceback
    for line in path.read_text(errors="replace").splitlines():
        if line.strip():
            yield line, _parsed(line)


def _parsed(line: str) -> Optional[Row]:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return row if isinstance(row, dict) else None
