"""Two hosts, one process each, train and test exactly as one host with two processes; and
under elastic torchrun the loss of one host leaves the other to finish the run alone.

The hosts are two network namespaces joined by a veth pair (root and iproute2 needed, else
skipped), each with its own address and no route to the other's loopback: torchrun on each
with ``--nnodes=2 --rdzv_backend=c10d``, the rendezvous on the first host's address
(``--rdzv_conf=is_host=...``: both namespaces share one host name, which would make both
claim the store), ``--local_addr`` and ``GLOO_SOCKET_IFNAME`` per host. The output folder is
shared, as a network file system would be.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import List

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, RECORDED_DIGITS, global_batches, torchrun

SETTINGS = [
    "model.args.backbone_args={widths: [8, 16]}",
    "data.global_batch_size=24",
    "train.iterations=20",
    "train.log_every=50",
    "data.prefetch=none",
]
TIMEOUT = 180


def _can_make_namespaces() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("ip") is not None


pytestmark = [
    pytest.mark.slow,  # torchrun agents in two network namespaces
    pytest.mark.skipif(
        not _can_make_namespaces(), reason="needs root and iproute2 (ip netns) for two network-namespace hosts"
    ),
]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def hosts():
    """Two namespaces ``(name, address, interface)`` joined by a veth pair; removed afterwards."""
    tag = f"{os.getpid() % 10000}"
    made: List[str] = []
    try:
        pair = []
        for i in (1, 2):
            name = f"rt{tag}h{i}"
            ip("netns", "add", name)
            made.append(name)
            # a resolver that answers at once (nothing listens on the namespace's loopback): without
            # one, each reverse lookup of a peer's address waits for the host's unreachable DNS server
            Path(f"/etc/netns/{name}").mkdir(parents=True, exist_ok=True)
            Path(f"/etc/netns/{name}/resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
            pair.append((name, f"10.231.{int(tag) % 250}.{i}", f"rt{tag}v{i}"))
        ip("link", "add", pair[0][2], "type", "veth", "peer", "name", pair[1][2])
        for name, address, interface in pair:
            ip("link", "set", interface, "netns", name)
            ip("-n", name, "addr", "add", f"{address}/24", "dev", interface)
            ip("-n", name, "link", "set", interface, "up")
            ip("-n", name, "link", "set", "lo", "up")
        yield pair
    except subprocess.CalledProcessError as err:
        pytest.skip(f"cannot create network namespaces here: {err.stderr.decode(errors='replace').strip()}")
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)
            shutil.rmtree(f"/etc/netns/{name}", ignore_errors=True)


def printed_test_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("test: "))


def node_command(hosts, node: int, port: int, extra_conf: str, *args: str) -> List[str]:
    """torchrun on host ``node``: one process, the c10d rendezvous hosted by the first host on ``port``."""
    name, address, _ = hosts[node]
    return [
        "ip",
        "netns",
        "exec",
        name,
        PYTHON,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=1",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={hosts[0][1]}:{port}",
        f"--rdzv_conf=is_host={'true' if node == 0 else 'false'}{extra_conf}",
        f"--local_addr={address}",
        *args,
    ]


@pytest.mark.timeout(400)
def test_two_nodes_equal_one_node_with_two_processes(hosts, tmp_path):
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    one = subprocess.run(
        torchrun(2, f"experiment.output_root={tmp_path / 'one'}", *SETTINGS),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert one.returncode == 0, one.stderr[-3000:]

    procs = []
    for node, (_, _, interface) in enumerate(hosts):
        cmd = node_command(
            hosts,
            node,
            29531,
            "",
            "--nnodes=2",
            "--rdzv_id=multinode-test",
            "main.py",
            f"experiment.output_root={tmp_path / 'two'}",
            *SETTINGS,
        )
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=ROOT,
                env={**env, "GLOO_SOCKET_IFNAME": interface},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=TIMEOUT))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    assert printed_test_line(outputs[0][0]) == printed_test_line(one.stdout)
    assert "2 process(es)" in outputs[0][1]
    assert not any(line.startswith("test: ") for line in outputs[1][0].splitlines())  # rank 0 prints, on the first node


ELASTIC = [
    *RECORDED_DIGITS,
    "data.global_batch_size=24",
    "train.epochs=2",
    "train.checkpoint_every_steps=10",
    "train.log_every=50",
    "train.auto_resume=true",
    "dist.timeout_s=60",
]


@pytest.mark.timeout(400)
def test_a_host_lost_under_elastic_torchrun_leaves_the_other_to_finish_with_the_same_global_batches(hosts, tmp_path):
    """``--nnodes=1:2 --max_restarts=3``: every process of the second host is killed after the first
    checkpoint; torchrun on the first host restarts its worker at world size 1 (``last_call_timeout=3``:
    it waits 3 s, not 30, for the lost host to come back), which resumes the run from its newest
    checkpoint and reads the global batches a one-process run reads."""
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    record = tmp_path / "elastic"
    reference = subprocess.Popen(
        [PYTHON, "main.py", f"experiment.output_root={tmp_path / 'one'}", *ELASTIC],
        cwd=ROOT,
        env={**env, "REGTRAIN_RECORD": str(tmp_path / "one")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = tmp_path / "two"
    procs = [
        subprocess.Popen(
            node_command(
                hosts,
                node,
                29532,
                ",last_call_timeout=3",
                "--nnodes=1:2",
                "--max_restarts=3",
                "--rdzv_id=elastic-test",
                "main.py",
                f"experiment.output_root={out}",
                *ELASTIC,
            ),
            cwd=ROOT,
            env={**env, "GLOO_SOCKET_IFNAME": hosts[node][2], "REGTRAIN_RECORD": str(record)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for node in (0, 1)
    ]
    try:
        deadline = time.monotonic() + TIMEOUT
        while not list(out.glob("*/run_001/checkpoints/epoch0000_batch000010.pt")):
            assert time.monotonic() < deadline and procs[0].poll() is None, "no first checkpoint"
            time.sleep(0.05)
        lost = subprocess.run(
            ["ip", "netns", "pids", hosts[1][0]], capture_output=True, text=True, timeout=30
        ).stdout.split()
        for pid in lost:  # the host dies: its launcher and its worker at once
            os.kill(int(pid), signal.SIGKILL)
        _, survivor_err = procs[0].communicate(timeout=TIMEOUT)
        one_out, one_err = reference.communicate(timeout=TIMEOUT)
    finally:
        for proc in (*procs, reference):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert procs[0].returncode == 0, survivor_err[-3000:]
    assert reference.returncode == 0, one_err[-3000:]
    log = next(out.glob("*/run_001/log.txt")).read_text()
    assert "world size 2 -> 1" in log, log[-3000:]
    step = int(re.search(r"training state restored: epoch 0, step (\d+)", log).group(1))
    order = global_batches(record, 2, 24)[:step] + global_batches(record.with_name("elastic.restart1"), 1, 24)
    assert len(order) == 2 * 52 and order == global_batches(tmp_path / "one", 1, 24)
