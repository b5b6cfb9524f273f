"""The README's examples, pasted in order into a fresh copy of the repository, run.

Every ``python main.py`` / ``torchrun`` / ``torch.distributed.launch`` line of the README's
bash blocks runs in the order the README gives them, after the files the README tells to
create (``Create `network/my_net.py`:`` and its code block) are written, shortened as the
README says (``train.iterations=2``; ``--nproc_per_node=2`` on this CPU; the demos' data
sizes). Lines that need what no CPU machine has here (several hosts, srun, a GPU dataset)
are listed in SKIPPED with the reason.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import yaml

from tests.conftest import ROOT, subprocess_env
from tests.dist_utils import free_port

README = ROOT / "README.md"
QUICK = ["train.iterations=2", "threads=1"]  # "Quick checks" in the README
DEMO_DATA = {  # the README's quick sizes of the generated demos
    "configs/video_moving_shapes": ["data.args.videos={train: 12, val: 6, test: 6}"],
    "configs/sod_shapes": ["data.args.counts={train: 16, val: 4, test: 4}"],
}
SKIPPED = {
    "--nnodes=2": "two machines",
    "srun ": "a SLURM allocation",
    "data.root=/data/imagenet": "ImageNet and NVIDIA DALI",
    "minet_resnet50_duts": "the DUTS dataset and a GPU",
    "my_photos": "the user's own images (tests/apps/test_predict.py predicts an image folder)",
}


def steps() -> List[Tuple[str, str]]:
    """``("file", path, code)`` and ``("run", command)`` in README order, as tuples of strings."""
    text = README.read_text()
    found = []
    for match in re.finditer(r"```(bash|python)\n(.*?)```", text, re.S):
        kind, body = match.groups()
        if kind == "python":
            created = re.findall(r"Create `([\w/]+\.py)`", text[max(0, match.start() - 300) : match.start()])
            if created:
                found.append(("file", created[-1], body))
            continue
        for line in body.replace("\\\n", " ").splitlines():
            for command in line.split("  #")[0].split("&&"):  # "pip install -e . && python main.py": the install is done
                command = command.strip()
                if command.startswith(("python main.py", "torchrun", "python -m torch.distributed.launch")):
                    found.append(("run", command, ""))
    return found


def shortened(command: str) -> List[str]:
    args = shlex.split(command)
    args = ["--nproc_per_node=2" if a.startswith("--nproc_per_node=") else a for a in args]
    if args[0] == "torchrun" or "torch.distributed.launch" in args:
        launcher = ["-m", "torch.distributed.run"] if args[0] == "torchrun" else ["-m", "torch.distributed.launch"]
        at = args.index("main.py")
        args = ["python", *launcher, f"--master_port={free_port()}", *[a for a in args[1:at] if a not in ("-m", "torch.distributed.launch")], *args[at:]]
    if "--mode" not in args:
        args += QUICK + [extra for key, value in DEMO_DATA.items() if key in command for extra in value]
    return [sys.executable, *args[1:]]


def reads_or_resumes(command: str, repo: Path) -> bool:
    """Whether a command depends on an earlier one: it reads a run's files or continues a run."""
    config = re.search(r"--config (\S+)", command)
    return any(mark in command for mark in ("--mode", "--resume", "output/")) or bool(config and "output/" in (repo / config.group(1)).read_text())


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
        return used.group(1) if used else yaml.safe_load(text).get("experiment", {}).get("name", "digits_small_cnn")
    return "digits_small_cnn"


def own_experiment(command: str, following: str, repo: Path, number: int) -> str:
    """A default-experiment command that neither reads nor continues a run, is not the quick start
    itself and is not resumed by the ``following`` command, gets an experiment folder of its own,
    so it runs beside the others (the ``latest`` link that later commands read stays the quick start's)."""
    if command == "python main.py" or "--resume" in following or reads_or_resumes(command, repo) or chain(command, repo) != "digits_small_cnn":
        return command
    return f"{command} experiment.name=readme_{number}"


@pytest.mark.timeout(900)
def test_the_readme_examples_run_in_order_on_a_fresh_copy(tmp_path):
    repo = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    for name in tracked:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
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

    def run_chain(commands: List[str]) -> List[str]:
        for command in commands:
            proc = subprocess.run(shortened(command), cwd=repo, env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"README command failed: {command}\n{proc.stderr[-3000:]}"
        return commands

    longest_first = sorted(chains.values(), key=len, reverse=True)
    with ThreadPoolExecutor(max_workers=2) as pool:  # one experiment's commands in order; two experiments at once
        ran = [command for done in pool.map(run_chain, longest_first) for command in done]
    assert "python main.py" in ran and len(ran) >= 15, ran
    # the quick start's command twice (it also runs first in the multi-process section): two runs
    assert len(list((repo / "output" / "digits_small_cnn").glob("run_*"))) >= 2
