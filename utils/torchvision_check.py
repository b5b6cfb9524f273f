"""Whether torch and torchvision are a pair built for each other, told in one line before a run starts.

torchvision's compiled operators are built against one torch release and one build of it (CPU, CUDA 13.0,
...): a CPU torch beside a CUDA torchvision imports torch fine and fails on ``import torchvision`` with
``operator torchvision::nms does not exist``. Runs import torchvision only when they need it (about 1 s), so
such an install trained the quick start and then failed predict, the ResNet and video configs and the
tests' collection with that traceback. ``check_torchvision`` compares the two installed versions first (no
import): a release pair with the same build tag (``2.14.1+cpu`` and ``0.29.1+cpu``) is taken as it is; any
other pair is imported once, and a failing import is an ``InstallError`` naming both versions and the fix.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from typing import Optional, Tuple

from utils.errors import InstallError, first_line

INDEX = "https://download.pytorch.org/whl/"  # PyTorch's own wheels, one index per build (cpu, cu130, ...)
# what an import of torchvision beside a torch of another build raises: an operator its compiled library did
# not register, a symbol that torch build lacks, or a CUDA library a CPU build does not ship
PAIR_FAILURES = r"torchvision::|undefined symbol|libcudart|libc10_cuda|_C\.so"


def _version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> Tuple[str, str]:
    """``("2.14.1", "cpu")`` from ``2.14.1+cpu``; the tag is empty for PyPI's own wheels."""
    release, _, tag = version.partition("+")
    return release, tag


def paired_release(torch_version: str) -> Optional[str]:
    """The torchvision release made with a torch 2.x release (``2.14.1`` -> ``0.29.*``); None for another torch."""
    found = re.match(r"2\.(\d+)\.", torch_version)
    return f"0.{int(found.group(1)) + 15}.*" if found else None


def looks_paired(torch_version: str, vision_version: str) -> bool:
    """Whether the versions name a pair made together: the paired release, the same build tag."""
    (torch_release, torch_tag), (vision_release, vision_tag) = _release(torch_version), _release(vision_version)
    expected = paired_release(torch_release)
    return expected is not None and vision_release.startswith(expected[:-1]) and torch_tag == vision_tag


def mismatch(torch_version: str, vision_version: str, err: BaseException) -> str:
    """The one line for a torchvision that does not load beside this torch: both versions, the fix."""
    release, tag = _release(torch_version)
    wanted = paired_release(release)
    index = f" --index-url {INDEX}{tag}" if tag else ""  # a tagged torch came from PyTorch's index for its build
    fix = (
        f"pip install --force-reinstall --no-deps 'torchvision=={wanted}'{index}"
        if wanted
        else f"install the torchvision release made for torch {release}"
    )
    return (
        f"torch {torch_version} and torchvision {vision_version} are not a matching pair: import torchvision failed "
        f"({type(err).__name__}: {first_line(err)}); install the torchvision built for this torch: {fix} "
        "(or both from one index: README.md, Install)"
    )


def check_torchvision() -> None:
    """Nothing when torchvision is missing (the run that needs it says so), looks paired, or imports; else
    InstallError. Cheap for a paired install: two version lookups, no import."""
    torch_version, vision_version = _version("torch"), _version("torchvision")
    if torch_version is None or vision_version is None or looks_paired(torch_version, vision_version):
        return
    try:
        importlib.import_module("torchvision")
    except (RuntimeError, ImportError, OSError) as err:
        if not re.search(PAIR_FAILURES, str(err)):  # another problem of the install: its own traceback
            raise
        raise InstallError(mismatch(torch_version, vision_version, err)) from err
