"""--mode pack as a job of 3 processes under torchrun (and 2 srun-style tasks): the same bytes as one process packs,
into a folder and into S3, also when the job is killed part-way and the same command completes it (on 3 or 2
processes); other settings are refused in one line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict

import pytest

import main
from tests.apps.conftest import make_digit_folder
from tests.checkpoint.test_resume_exact import kill_job
from tests.conftest import ROOT, subprocess_env
from tests.distributed.test_slurm import free_job_port
from tests.fixtures.dist_utils import run, torchrun

TIMEOUT = 240

# seconds a file takes to reach in the packs a test kills (and in the same command run again: the pack's settings
# include it): a rank's ten files last a second, so the kill lands before the split ends
SLOW = 0.1


def _args(data: Path, output: str, delay: float = 0.0, size: str = "4KB") -> list:
    """A few dozen 8x8 PNGs (train 30, val 12, test 2) in shards of 4 KB: about 4 samples each."""
    return [
        "--mode", "pack", "--output", output, "--shard-size", size, "--workers", "1",
        "custom_imports=[tests.shards.slow_folder]", "data.name=slow_folder", f"data.root={data}",
        f"data.args={{channels: 1, delay: {delay}}}",
    ]  # fmt: skip


def _files(folder: Path) -> Dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The data, and its pack by one process: every file's bytes."""
    root = tmp_path_factory.mktemp("packs")
    data = make_digit_folder(root / "data")
    assert main.main(_args(data, str(root / "one"))) == 0
    files = _files(root / "one")
    assert sum(name.startswith("train/shard-") for name in files) > 5 and "val/index.json" in files
    return data, files


def _check(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_three_processes_pack_the_bytes_one_packs(tmp_path, reference):
    data, expected = reference
    result = run(torchrun(3, *_args(data, str(tmp_path / "three"))), timeout=TIMEOUT)
    _check(result)
    assert result.stdout.count("pack: train 30 samples in ") == 1  # one summary line: rank 0's
    assert _files(tmp_path / "three") == expected  # nothing else left: no records, no manifest


def _objects(client, bucket: str) -> Dict[str, bytes]:
    """Every object under ``p/``, by its name below it."""
    listed = client.list_objects_v2(Bucket=bucket, Prefix="p/").get("Contents", [])
    return {item["Key"][2:]: client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read() for item in listed}


def _kill_after_a_shard(data: Path, output: str, recorded: Callable[[], bool]) -> str:
    """Starts a slow 3-process pack into ``output`` and SIGKILLs the whole job once ``recorded()`` (a shard's
    record is in the output); what the job printed."""
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    # a session of its own: the kill takes the launcher's whole process group, never pytest
    job = subprocess.Popen(
        torchrun(3, *_args(data, output, delay=SLOW)), cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + TIMEOUT
    while not recorded() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    kill_job(job)  # its 3 processes and the launcher, mid-way through the training split
    return job.communicate(timeout=60)[0].decode(errors="replace")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_three_processes_pack_the_same_objects_into_s3_also_when_killed_and_run_again(reference, s3_env):
    data, expected = reference
    bucket, client = s3_env.bucket(), s3_env.client()
    _check(run(torchrun(3, *_args(data, f"s3://{bucket}/p")), timeout=TIMEOUT))
    assert _objects(client, bucket) == expected
    bucket = s3_env.bucket()

    def records() -> int:
        return client.list_objects_v2(Bucket=bucket, Prefix="p/.pack/train/").get("KeyCount", 0)

    shown = _kill_after_a_shard(data, f"s3://{bucket}/p", lambda: records() >= 2)  # a shard's rows and facts
    assert records() and "p/train/index.json" not in _objects(client, bucket), shown[-3000:]
    _check(run(torchrun(3, *_args(data, f"s3://{bucket}/p", delay=SLOW)), timeout=TIMEOUT))
    assert _objects(client, bucket) == expected


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_pack_is_completed_by_the_same_command_and_other_settings_are_refused(tmp_path, reference):
    data, expected = reference
    out = tmp_path / "killed"
    records = out / ".pack" / "train"
    shown = _kill_after_a_shard(data, str(out), lambda: bool(list(records.glob("*.json"))))
    kept = {path.name: path.stat().st_mtime_ns for path in records.glob("*.json")}
    assert kept and not (out / "train" / "index.json").exists(), shown[-3000:]
    written = {name[: -len(".json")]: (out / "train" / name[: -len(".json")]).stat().st_mtime_ns for name in kept}
    changed_shard = out / "train" / sorted(written)[0]  # a finished shard changed since: its sha256 is not the record's
    changed_shard.write_bytes(changed_shard.read_bytes()[::-1])
    del written[changed_shard.name]

    changed = run(torchrun(3, *_args(data, str(out), delay=SLOW, size="8KB")), timeout=TIMEOUT)
    errors = [line for line in (changed.stdout + changed.stderr).splitlines() if "error:" in line]
    assert changed.returncode != 0 and len(errors) == 1, changed.stdout + changed.stderr
    assert "started with shard_size=4000, not 8000" in errors[0]

    _check(run(torchrun(2, *_args(data, str(out), delay=SLOW)), timeout=TIMEOUT))  # any number of processes
    assert _files(out) == expected  # the changed shard written again
    for name, stamp in written.items():  # the other shards finished before the kill were kept, not written again
        assert (out / "train" / name).stat().st_mtime_ns == stamp


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_srun_style_tasks_pack_the_bytes_one_packs(tmp_path, reference):
    data, expected = reference
    job_id = str(free_job_port() - 15000 + 90000)  # the job's port is 15000 + its id's last 4 digits
    launched = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_ERROR_FILE")
    tasks = []
    for rank in range(2):  # what srun sets for each task of `srun --ntasks=2`, no launcher between
        env = {k: v for k, v in subprocess_env().items() if k not in launched}
        env.update(SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank), SLURM_JOB_NODELIST="localhost")
        env["SLURM_JOB_ID"] = job_id
        command = [sys.executable, "main.py", *_args(data, str(tmp_path / "srun")), "dist.timeout_s=120"]
        tasks.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        shown = [task.communicate(timeout=TIMEOUT) for task in tasks]
    finally:
        for task in tasks:
            task.kill()
    assert [task.returncode for task in tasks] == [0, 0], [err[-2000:] for _, err in shown]
    assert _files(tmp_path / "srun") == expected
