"""How a file name that is not UTF-8 is written into text: a CSV row, a log line, an error line.

Python gives such a name (``\\xff\\xfe.png`` on an old share) with each byte UTF-8 cannot decode as a lone
surrogate (``U+DC80`` to ``U+DCFF``, PEP 383's ``surrogateescape``), and a UTF-8 file cannot hold those:
writing one raised ``UnicodeEncodeError``. Every text the framework writes gives each such byte as ``\\xNN``
(the byte's value in two hex digits, as Python writes bytes), the rest of the name as it is: ``predictions.csv``,
``log.txt``, the console and ``error:`` lines read ``\\xff\\xfe.png`` alike. Any other character UTF-8 cannot
hold (a lone surrogate no file name gives) is written as Python's ``\\udXXX`` escape. The files themselves keep
their bytes: a mask predicted for ``\\xff\\xfe.png`` is named with the same bytes and ``.png``.

Standard library only: ``utils/errors.py`` and ``utils/log.py`` use it.
"""

from __future__ import annotations

import codecs
from typing import Tuple

ERRORS = "regtrain-undecodable"  # the codec error handler: ``open(..., errors=ERRORS)``


def _escaped(err: UnicodeError) -> Tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    out = []
    for char in err.object[err.start : err.end]:
        code = ord(char)
        out.append(f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}")
    return "".join(out), err.end


codecs.register_error(ERRORS, _escaped)


def shown(text: str) -> str:
    """``text`` as written text gives it: each undecodable byte of a file name as ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", ERRORS).decode("utf-8")
