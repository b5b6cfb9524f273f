"""The project's errors for bad input: the only exceptions ``main.py`` shows as one line.

``main.py`` turns a :class:`UserError` into one ``error: <message>`` line and exit
code 2. Any other exception is a bug (the framework's or, more often, the
user's own network, loss, dataset, metric or hook) and keeps its full
traceback, so the frames name the file and line to fix.

Raise the subclass that says what is wrong, at the place that knows it, with a
message that names the problem and the fix. Each subclass also derives from
the builtin exception that the same check raised before it existed, so
callers that caught ``ValueError``/``KeyError``/``RuntimeError`` keep working.
"""

from __future__ import annotations

from utils.secret_text import masked
from utils.undecodable import shown


class UserError(Exception):
    """Bad input the user can fix: an ``error:`` line and exit code 2, never a traceback."""


class ConfigError(UserError, ValueError):
    """A bad config key, value, range or combination; the message names the key and the fix."""


class RegistryError(UserError, KeyError):
    """An unknown registered name, or one name registered twice."""

    def __str__(self) -> str:  # KeyError's own str() would quote the message
        return str(self.args[0]) if self.args else ""


class DataError(UserError, ValueError):
    """Missing, empty, unreadable or inconsistent data (folders, files, labels)."""


class CheckpointError(UserError, RuntimeError):
    """A missing, corrupt, unwritable or mismatched checkpoint; the message names the file and the fix."""


class OutputError(UserError, OSError):
    """A file of the run's output folder cannot be written (a full disk, no permission); what was written before is kept."""

    @classmethod
    def writing(cls, path: object, err: OSError, advice: str = "resume with --resume") -> "OutputError":
        """The error for a failed write of ``path``; ``advice``: what to run once the disk is fixed (the mode's own)."""
        return cls(
            f"could not write '{path}' ({err.strerror or err}); free disk space or fix the permissions of its folder, then {advice}"
        )


class ContractError(UserError, TypeError):
    """A user's network or loss returned what the framework cannot use; the message names the class,
    its file, what came and what is expected (``utils/model/outputs.py``)."""


class ExportError(UserError, RuntimeError):
    """``--mode export`` cannot export or verify the network: a missing extra, or an exported model that
    differs from the network by more than the stated tolerance."""


class InstallError(UserError, ImportError):
    """Installed packages that do not work together (torch and torchvision of two builds: ``utils/torchvision_check.py``)."""


class NonFiniteError(UserError, FloatingPointError):
    """The loss or the weights became NaN/inf (``train.nonfinite``); the run keeps its folder, marked failed
    (``utils/run/failed.py``), and no checkpoint after the NaN is written."""


class LinkError(UserError, RuntimeError):
    """A link found where a folder the run owns keeps one of its folders (``utils/files/owned.py``): a run never
    writes through a link out of its folder. Not an OSError: the handlers of a failed write do not reword it."""


def first_line(err: BaseException) -> str:
    """The first line of ``err``'s message without its closing full stop, to quote inside a sentence of ours
    (torch and torchvision write several lines)."""
    return (str(err).strip().splitlines() or [""])[0].rstrip(".")


def one_line(err: BaseException) -> str:
    """The message of ``err`` as the one line ``main.py`` prints.

    An error raised in a DataLoader worker process arrives re-raised with the
    worker's traceback in its message; its last line holds the message itself.
    A password in a URL it names is masked (``utils/secret_text.py``).
    """
    text = str(err)
    if "\nOriginal Traceback" in text:
        last = text.rstrip().splitlines()[-1]  # "utils.errors.DataError: <message>"
        text = last.split(": ", 1)[1] if ": " in last else last
    # a password in a URL masked, a file name that is not UTF-8 as every text writes it (utils/undecodable.py)
    return masked(shown(text))


def name_list(names: object, show: int = 10) -> str:
    """``names`` for an error message: the first ``show`` of them, then how many more."""
    items = [str(name) for name in names]  # type: ignore[attr-defined]
    more = f" ... and {len(items) - show} more" if len(items) > show else ""
    return ", ".join(items[:show]) + more
