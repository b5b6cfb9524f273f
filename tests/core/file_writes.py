"""Which calls write, rename or remove files by name: the rule of ``test_code_rules.py`` that keeps every write
under a folder a run owns in ``utils/files/owned.py`` (never through a link), and the few product calls allowed
to write by other means (``WRITES_ELSEWHERE``, ``file: call`` with why)."""

from __future__ import annotations

import ast

_OS_WRITES = {"remove", "unlink", "rmdir", "replace", "rename", "renames", "makedirs", "mkdir", "symlink", "link"}
_METHODS = {"unlink", "rmdir", "mkdir", "touch", "write_text", "write_bytes", "rename", "symlink_to", "hardlink_to"}
_SHUTIL = {"rmtree", "move", "copy", "copy2", "copyfile", "copytree"}
_OTHERS = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "FileHandler", "SummaryWriter", "open_memmap"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_SAVES = {"save", "save_file", "export_chrome_trace", "savefig"}  # by name when given a path (``_a_path``)
WRITES_ELSEWHERE = {
    "utils/checkpoint/files.py: tempfile.mkstemp": "a new name (O_EXCL: never a link) in the folder make_dirs checked",
    "utils/log.py: SummaryWriter": "opens tb/ once make_dirs refused a link there; its events file is a new name",
    "utils/data/shards/writer.py: np.lib.format.open_memmap": "numpy creates by name: check_file clears it first",
    "utils/data/datasets/moving_shapes.py: folder.mkdir": "a synthetic data set, made in the data folder the config names",
    "utils/data/datasets/shapes_sod.py: (base / image_dir).mkdir": "a synthetic data set, as moving_shapes.py",
    "utils/data/datasets/shapes_sod.py: (base / mask_dir).mkdir": "a synthetic data set, as moving_shapes.py",
    "utils/data/sample_images.py: folder.mkdir": "the sample images of the README, in the data folder it names",
    "utils/data/sample_images.py: Image.fromarray(pixels).save": "as folder.mkdir of sample_images.py",
    "utils/data/datasets/moving_shapes.py: Image.fromarray(frame.transpose(1, 2, 0)).save": "a synthetic data set",
    "utils/data/datasets/shapes_sod.py: Image.fromarray(image).save": "a synthetic data set",
    "utils/data/datasets/shapes_sod.py: Image.fromarray(mask).save": "a synthetic data set",
    "utils/checkpoint/sharded.py: dcp.save": "into a new folder (make_new_folder) that holds nothing else",
    "utils/commands/export.py: program.save": "into export's new staging folder (make_new_folder)",
    "utils/hook/profiler.py: profiler.export_chrome_trace": "by name: check_file clears the name first",
    "utils/distributed/process_group.py: open": "torchrun's error file (TORCHELASTIC_ERROR_FILE), as torch writes it",
}


def _a_path(node: ast.AST) -> bool:
    """Whether ``node`` looks like a path: ``str(...)``, ``a / b``, a name with path, file, folder or dir in it."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
        return True
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)) or any(
        word in name for word in ("path", "file", "folder", "dir", "tmp")
    )


def _writing_mode(call: ast.Call, position: int, unknown: bool) -> bool:
    """Whether the mode of an ``open`` call writes (``unknown``: what one that is not a constant counts as)."""
    mode = next((kw.value for kw in call.keywords if kw.arg == "mode"), None)
    mode = mode or (call.args[position] if len(call.args) > position else None)
    if mode is None or not isinstance(mode, ast.Constant):
        return mode is not None and unknown
    return bool(set("wax+") & set(str(mode.value)))


def writes_files(call: ast.Call) -> bool:
    """Whether ``call`` writes, renames or removes a file or folder by name (an ``open`` for writing included)."""
    func = call.func
    if isinstance(func, ast.Name):
        return (func.id == "open" and _writing_mode(call, 1, True)) or func.id in _OTHERS
    if not isinstance(func, ast.Attribute):
        return False
    base = func.value.id if isinstance(func.value, ast.Name) else None
    if base == "os" and func.attr == "open":
        return any(isinstance(n, ast.Attribute) and n.attr in _WRITE_FLAGS for n in ast.walk(call))
    if func.attr in _SAVES:  # image.save(path), dcp.save(..., checkpoint_id=path): a file object is not by name
        given = [*call.args, *(kw.value for kw in call.keywords if kw.arg in ("checkpoint_id", "path", "fp"))]
        return any(_a_path(arg) for arg in given)
    if func.attr == "open":  # Path.open("w"), tarfile.open(path, "w"); a file object handed over is not by name
        by_name = not any(kw.arg == "fileobj" for kw in call.keywords)
        return by_name and _writing_mode(call, 1 if base else 0, False)
    return (
        (base == "os" and func.attr in _OS_WRITES)
        or (base == "shutil" and func.attr in _SHUTIL)
        or func.attr in _METHODS | _OTHERS
    )
