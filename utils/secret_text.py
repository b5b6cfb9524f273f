"""Secrets in settings: a password or token inside a URI is held as a ``Secret``, whose text is the masked form.

``http://alice:PW@host`` (a tracking URI, a sweep's database URL, any string of the config or of the environment a
setting is read from) is kept as ``Secret``: a ``str`` whose characters are ``http://alice:***@host``, so whatever
turns it into text shows the masked form, with nothing to remember at the call site: log lines and f-strings, JSON
(the trackers' identity and spool), YAML (``config.yaml``, TensorBoard's text: its representer is registered here),
pickling and deep copies (the config a checkpoint keeps is ``dataclasses.asdict``'s copy: plain masked strings),
``str()`` and every string operation (they return plain masked strings). Only ``reveal`` gives the real value, and
only the code that opens the connection calls it. Query parameters that carry a secret (``?token=``, ``password=``,
...) are masked the same way.

A masked value read back (a run folder's ``config.yaml``, a checkpoint's config) cannot connect: ``unmasked`` takes
the real one again from what the user gives now (the command line or an environment variable), where its masked form
is the same; ``needs_again`` is the line saying how to give it otherwise. This module imports only the standard
library and yaml (``utils/errors.py`` masks its lines with it).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional

import yaml

MASK = "***"
# scheme://user:PASSWORD@host: the password runs to the last '@' before the host, as URL parsers split it (an '@'
# left unencoded in a password, 'alice:p@ss@host', is the password's: urllib and requests send 'p@ss'); no '/', '?'
# or '#' in it, so 'host:5000/a@b' keeps its port
USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^/?#@:\s]*:)(?P<secret>[^\s/?#]+)(?=@[^\s@/?#]*(?:[/?#\s]|$))"
)
# ?token=..., &password=..., &api_key=... (what a URL carries for authentication)
QUERY = re.compile(
    r"(?P<head>[?&](?:token|access_token|auth|password|passwd|pwd|secret|api_key|apikey|key|sig|signature)=)"
    r"(?P<secret>[^&#\s]+)",
    re.IGNORECASE,
)


def masked(text: str) -> str:
    """``text`` with every password of a URI and every secret query parameter of one as ``***`` (a text without
    ``://`` names no URI: a file path such as ``runs/a&key=1`` is left as it is)."""
    text = str(text)  # a Secret's own text is masked already
    if "://" not in text:
        return text
    return QUERY.sub(rf"\g<head>{MASK}", USERINFO.sub(rf"\g<head>{MASK}", text))


def is_masked(text: Any) -> bool:
    """Whether ``text`` holds a secret that was masked (read back from a file): it cannot connect."""
    if not isinstance(text, str) or isinstance(text, Secret):
        return False
    return any(found.group("secret") == MASK for pattern in (USERINFO, QUERY) for found in pattern.finditer(text))


class Secret(str):
    """A setting that holds a secret: its characters are the masked form, the real value is ``reveal``'s."""

    def __new__(cls, real: str) -> "Secret":
        made = super().__new__(cls, masked(real))
        made._real = str.__str__(real) if not isinstance(real, Secret) else real._real
        return made

    def reveal(self) -> str:
        return self._real

    def __reduce_ex__(self, protocol: Any) -> Any:  # pickled (a checkpoint, a worker process): the masked text only
        return (str, (str.__str__(self),))

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    def __copy__(self) -> "Secret":
        return self

    def __deepcopy__(self, memo: Any) -> str:
        # a copy is made to be kept (``dataclasses.asdict``: the config that config.yaml, checkpoints, TensorBoard and
        # trackers get): the masked text, a plain str, which a weights-only load reads back
        return str.__str__(self)


def _represent(dumper: Any, data: Secret) -> Any:
    return dumper.represent_str(str.__str__(data))


for _dumper in (yaml.SafeDumper, yaml.Dumper, getattr(yaml, "CSafeDumper", None), getattr(yaml, "CDumper", None)):
    if _dumper is not None:
        _dumper.add_representer(Secret, _represent)


def hide(value: Any) -> Any:
    """``value`` as a ``Secret`` where it is a string holding a secret; anything else as it is."""
    if isinstance(value, str) and not isinstance(value, Secret) and masked(value) != value:
        return Secret(value)
    return value


def hide_all(value: Any) -> Any:
    """``hide`` on every string of ``value`` (mappings, lists and dataclasses walked, changed in place)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            setattr(value, item.name, hide_all(getattr(value, item.name)))
        return value
    if isinstance(value, dict):
        for key in list(value):
            value[key] = hide_all(value[key])
        return value
    if isinstance(value, list):
        value[:] = [hide_all(item) for item in value]
        return value
    return hide(value)


def reveal(value: Any) -> Any:
    """The real value of a ``Secret`` (for the connection only); anything else as it is."""
    return value.reveal() if isinstance(value, Secret) else value


def unmasked(value: str, given: Optional[str]) -> Optional[str]:
    """``value`` ready to connect: where it was read back masked (``is_masked``), the real one ``given`` now (the
    command line, the environment) when its masked form is the same; None when it is not (``needs_again`` says so)."""
    if not is_masked(value):
        return value
    return hide(given) if given and masked(given) == value else None


def needs_again(what: str, value: str, source: str) -> str:
    """The message for a setting ``what`` read back masked, ``value``, with no real one given in ``source``."""
    return (
        f"{what} '{value}' holds a password or token the run folder keeps masked (its config.yaml and checkpoints "
        f"never hold it): give it again, in {source} or on the command line, e.g. "
        f"{source}='{value.replace(MASK, 'PASSWORD')}'"
    )
