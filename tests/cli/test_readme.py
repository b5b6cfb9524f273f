"""The examples of the README and of the docs pages, pasted in order into a fresh copy of the repository, run.

Every ``python main.py`` / ``torchrun`` / ``torch.distributed.launch`` / sample images line of their bash blocks
runs in reading order (the README's, then each page's in the map's order: ``tests/fixtures/docs_pages.py``),
after the files a page tells to create (``Create `network/my_net.py`:`` and its code block) are written,
shortened as the README says (``train.iterations=2``; ``--nproc_per_node=2`` on this CPU; the demos' data
sizes). Lines that need what no CPU machine has here (several hosts, srun, a GPU dataset) are in SKIPPED. A
``python main.py`` line runs forked from a process of the copy that imported torch once.

Each command is checked for what it prints: a training run one ``test: k=v ...`` line, ``best <metric>=<value>
at epoch E`` and ``N process(es)``; ``--mode test`` of an experiment's ``latest/checkpoints/best.pt`` the test
line that the run ``latest`` points to printed (N ranks or one); ``--resume`` ``training state restored: epoch
E, step S`` in the run it continues, and that run's test line again; a config with ``model.pretrained``
``loaded N tensors from PATH``; ``--mode export`` the file it wrote; ``--mode compare`` its table and folder;
``--print-config`` the config as YAML (``tests/fixtures/readme_steps.py``: the rest). At the end each
experiment's folder holds exactly the folders the commands named and ``latest`` points to its last run."""

from __future__ import annotations

import re
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import yaml

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import free_port
from tests.fixtures.docs_pages import reading_order
from tests.fixtures.forked_main import MainServer
from tests.fixtures.fresh_copy import fresh_copy
from tests.fixtures.readme_steps import COMMANDS, SAMPLES, bare_resume, folder_of, preempted, sample_images
from tests.fixtures.readme_sweep import sweep_folders

README = ROOT / "README.md"
ITERATIONS = 2
QUICK = [f"train.iterations={ITERATIONS}", "threads=1"]  # "Quick checks" in the README
RANKS = 2  # every --nproc_per_node=N runs as 2 processes on this CPU
DEMO_DATA = {  # the README's quick sizes of the generated demos
    "configs/video_moving_shapes": ["data.args.videos={train: 12, val: 6, test: 6}"],
    "configs/sod_shapes": ["data.args.counts={train: 16, val: 4, test: 4}"],
}
SKIPPED = {
    "--nnodes=2": "two machines",
    "srun ": "a SLURM allocation",
    "data.root=/data/imagenet": "ImageNet and NVIDIA DALI",
    "minet_resnet50_duts": "the DUTS dataset and a GPU",
}


def steps() -> List[Tuple[str, str, str]]:
    """``("file", path, code)`` and ``("run", command, "")`` in reading order: the README's, then each page's."""
    found = []
    for text in (page.read_text() for page in reading_order()):
        for match in re.finditer(r"```(bash|python)\n(.*?)```", text, re.S):
            kind, body = match.groups()
            if kind == "python":
                created = re.findall(r"Create `([\w/]+\.py)`", text[max(0, match.start() - 300) : match.start()])
                if created:
                    found.append(("file", created[-1], body))
                continue
            for line in body.replace("\\\n", " ").splitlines():
                # "pip install -e . && python main.py": the install is done
                for command in line.split("  #")[0].split("&&"):
                    command = command.strip()
                    if command.startswith(COMMANDS):
                        found.append(("run", command, ""))
    return found


def shortened(command: str) -> List[str]:
    args = shlex.split(command)
    if command.startswith(SAMPLES):
        return [sys.executable, *args[1:]]
    args = [f"--nproc_per_node={RANKS}" if a.startswith("--nproc_per_node=") else a for a in args]
    if args[0] == "torchrun" or "torch.distributed.launch" in args:
        launcher = ["-m", "torch.distributed.run"] if args[0] == "torchrun" else ["-m", "torch.distributed.launch"]
        at = args.index("main.py")
        args = [
            "python",
            *launcher,
            f"--master_port={free_port()}",
            *[a for a in args[1:at] if a not in ("-m", "torch.distributed.launch")],
            *args[at:],
        ]
    if "--mode" not in args:
        args += QUICK + [extra for key, value in DEMO_DATA.items() if key in command for extra in value]
    return [sys.executable, *args[1:]]


def reads_or_resumes(command: str, repo: Path) -> bool:
    """Whether a command depends on an earlier one: it reads a run's files or continues a run."""
    config = re.search(r"--config (\S+)", command)
    return any(mark in command for mark in ("--mode", "--resume", "output/")) or bool(
        config and "output/" in (repo / config.group(1)).read_text()
    )


def chain(command: str, repo: Path) -> str:
    """The experiment a command reads or writes: commands of one experiment run in README order, others
    side by side (a fine-tuning config that loads another experiment's best.pt joins that one's chain)."""
    named = re.search(r"experiment.name=(\S+)", command) or re.search(r"output/([\w.]+)/", command)
    if named:
        return named.group(1)
    config = re.search(r"--config (\S+)", command)
    if config:
        text = (repo / config.group(1)).read_text()
        used = re.search(r"output/([\w.]+)/", text)
        stem = Path(config.group(1)).stem  # a config without experiment.name is named after its file
        return used.group(1) if used else yaml.safe_load(text).get("experiment", {}).get("name", stem)
    return "digits_small_cnn"


def own_experiment(command: str, following: str, repo: Path, number: int) -> str:
    """A default-experiment command that neither reads nor continues a run, is not the quick start
    itself and is not resumed by the ``following`` command, gets an experiment folder of its own,
    so it runs beside the others (the ``latest`` link that later commands read stays the quick start's)."""
    if (
        command == "python main.py"
        or command.startswith(SAMPLES)
        or "--resume" in following
        or reads_or_resumes(command, repo)
        or chain(command, repo) != "digits_small_cnn"
    ):
        return command
    return f"{command} experiment.name=readme_{number}"


TEST_LINE = re.compile(r"^test: (?:\w+=\S+ )*\w+=\S+$")


def metrics(line: str) -> Dict[str, str]:
    """``{"top1": "0.9778", ...}`` from a ``test: k=v ...`` line."""
    return dict(pair.split("=", 1) for pair in line.split()[1:])


def printed_test_lines(stdout: str) -> List[str]:
    return [line for line in stdout.splitlines() if TEST_LINE.match(line)]


@dataclass
class Run:
    """A training run as its commands printed it: its folder and its test line."""

    folder: Path
    test: str


@dataclass
class Chain:
    """What one experiment's commands printed so far, in README order."""

    repo: Path
    runs: Dict[str, Run] = field(default_factory=dict)  # experiment folder name -> its latest training run
    folders: List[Path] = field(default_factory=list)  # every folder a command named as its own
    printed: Dict[str, str] = field(default_factory=dict)  # command -> the test line it printed first


def check(command: str, out: str, err: str, seen: Chain) -> None:
    """What ``command`` (as the README writes it) must have printed: stdout ``out``, the log ``err``."""
    assert "Traceback" not in err, err[-3000:]
    if "--help" in command:
        assert out.startswith("usage:"), out
        return
    if command.startswith(SAMPLES):
        return sample_images(out, seen.repo)
    if "--print-config" in command:  # the resolved config as YAML, and no run folder
        assert {"experiment", "data", "model", "train"} <= set(yaml.safe_load(out)) and "run folder" not in err, out
        return
    if "--mode compare" in command:  # no process, no run folder: the table, then the folder it wrote
        wrote = re.search(r"^compare: runs=\d+ configurations=\d+ incomplete=\d+ folder=(\S+)$", out, re.M)
        assert wrote and "| rank | " in out, out
        folder = seen.repo / wrote.group(1)
        assert folder.name.startswith("compare_") and folder not in seen.folders, folder
        assert sorted(p.name for p in folder.iterdir()) == ["compare.csv", "compare.md", "compare.png"]
        seen.folders.append(folder)
        return
    if "--sweep" in command:  # the table of trials; its run folders and its own, in the experiment's folder
        seen.folders.extend(sweep_folders(command, out, seen.repo))
        return
    launched = command.startswith(("torchrun", "python -m torch.distributed"))
    assert re.search(rf"\b{RANKS if launched else 1} process\(es\)", err), err[-3000:]
    folder = folder_of(err, seen.repo)
    mode = re.search(r"--mode (\w+)", command)
    if mode and mode.group(1) == "export":
        wrote = re.fullmatch(r"export: format=(\S+) max_abs_difference=(\S+) tolerance=(\S+) file=(\S+)", out.strip())
        assert wrote, out
        fmt, difference, tolerance, path = wrote.groups()
        assert fmt == re.search(r"--format (\S+)", command).group(1) and float(difference) <= float(tolerance)
        assert Path(path).parent == folder and Path(path).is_file() and folder.name.startswith("export_")
        seen.folders.append(folder)
        return
    if mode and mode.group(1) not in ("train", "test"):  # predict: its summary line
        assert re.search(rf"^{mode.group(1)}: \w+=", out, re.M), out
        seen.folders.append(folder)
        return
    lines = printed_test_lines(out)
    assert len(lines) == 1, out
    seen.printed.setdefault(command, lines[0])
    if mode and mode.group(1) == "test":  # a checkpoint holds what its run tested, on N ranks as on one
        experiment = re.search(r"output/([\w.]+)/latest/", command).group(1)
        assert lines[0] == seen.runs[experiment].test, (command, lines[0], seen.runs[experiment].test)
        assert folder.name.startswith("test_")
        seen.folders.append(folder)
        return
    assert not mode or mode.group(1) == "train", command
    best = re.search(r"best (\w+)=(\S+) at epoch (\d+)", err)
    assert best, err[-3000:]
    monitor = re.search(r"eval\.monitor=(\w+)", command)
    assert best.group(1) in {*metrics(lines[0]), *(f"ema_{k}" for k in metrics(lines[0]))}, (best.group(0), lines[0])
    assert monitor is None or best.group(1) == monitor.group(1), best.group(0)
    float(best.group(2))
    pretrained = pretrained_of(command, seen.repo)
    if pretrained:
        assert re.search(rf"loaded [1-9]\d* tensors from {re.escape(pretrained)}", err), err[-3000:]
    experiment = folder.parent.name
    if "--resume" in command:  # continues the experiment's last run, whose steps are done: it tests again
        assert re.search(rf"training state restored: epoch \d+, step {ITERATIONS}\b", err), err[-3000:]
        assert folder == seen.runs[experiment].folder and lines[0] == seen.runs[experiment].test
    else:
        assert folder.name.startswith("run_") and folder not in seen.folders, folder
        seen.folders.append(folder)
    seen.runs[experiment] = Run(folder, lines[0])


def pretrained_of(command: str, repo: Path) -> Optional[str]:
    """The ``model.pretrained`` a training command's config names, if any."""
    config = re.search(r"--config (\S+)", command)
    if not config:
        return None
    return (yaml.safe_load((repo / config.group(1)).read_text()).get("model") or {}).get("pretrained")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_examples_run_in_order_on_a_fresh_copy_and_print_what_they_say(tmp_path):
    repo = tmp_path / "repo"
    if not fresh_copy(repo):
        pytest.skip("not a git checkout")
    env = {**subprocess_env(), "PYTHONPATH": str(repo)}
    found = steps()
    for kind, what, code in found:
        if kind == "file":
            (repo / what).write_text(code)  # the files come before the commands that use them
    commands = [what for kind, what, _ in found if kind == "run" and not any(marker in what for marker in SKIPPED)]
    chains: Dict[str, List[str]] = {}
    for number, (command, following) in enumerate(zip(commands, [*commands[1:], ""])):
        command = own_experiment(command, following, repo, number)
        chains.setdefault(chain(command, repo), []).append(command)

    def run_chain(commands: List[str]) -> Chain:
        seen = Chain(repo)
        for command in commands:
            if bare_resume(command):  # "preempted; later": the run it continues did not finish
                preempted(seen.runs[chain(command, repo)].folder)
            proc = server.command(shortened(command), repo, env, timeout=300)  # main.py forked, launchers started
            assert proc.returncode == 0, f"documented command failed: {command}\n{proc.stderr[-3000:]}"
            try:
                check(command, proc.stdout, proc.stderr, seen)
            except (AssertionError, KeyError, AttributeError, ValueError) as err:
                raise AssertionError(
                    f"documented command printed what it should not: {command}\n{err!r}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
                ) from err
        return seen

    longest_first = sorted(chains.values(), key=len, reverse=True)
    with MainServer(repo, env) as server, ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(run_chain, longest_first))  # one experiment's commands in order; two experiments at once
    ran = [command for commands in longest_first for command in commands]
    assert "python main.py" in ran and len(ran) >= 15, ran
    # the quick start prints the metrics the README's example line shows
    example = re.search(r"`(test: [^`]+)`", README.read_text()).group(1)
    quick = next(seen.printed["python main.py"] for seen in done if "python main.py" in seen.printed)
    assert set(metrics(example)) == set(metrics(quick)), (example, quick)
    # one folder per run and per mode, named by its command; latest is the experiment's last training run
    named = sorted(path for seen in done for path in seen.folders if path.parent.parent == repo / "output")
    on_disk = sorted(path for path in (repo / "output").glob("*/*") if path.is_dir() and not path.is_symlink())
    assert named == on_disk, (named, on_disk)
    for seen in done:
        for experiment, run in seen.runs.items():
            assert (repo / "output" / experiment / "latest").resolve() == run.folder.resolve()
    # the quick start's command twice (it also runs first in the multi-process section): two runs
    assert len(list((repo / "output" / "digits_small_cnn").glob("run_*"))) >= 2
