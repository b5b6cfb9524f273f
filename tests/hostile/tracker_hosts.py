"""The hosts of the tracker cases: a real MLflow server (``tests/fixtures/mlflow_server.py``), one for the session,
and "another host", a listener that answers every request with an error and records what reached it (its path and
headers), to show that no request, and no credential, goes to a host that only a file names."""

from __future__ import annotations

import http.server
import threading
from typing import Dict, Iterator, List

import pytest

from tests.fixtures.mlflow_server import MlflowServer, mlflow_command


class Listener:
    """An HTTP listener on loopback that records each request (method, path, headers) and answers 503."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, str]] = []
        seen = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def _record(self) -> None:
                seen.append({"method": self.command, "path": self.path, **dict(self.headers)})
                self.send_error(503)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _record

            def log_message(self, *args: object) -> None:  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def other_host() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.close()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory) -> Iterator[MlflowServer]:
    pytest.importorskip("mlflow", reason="MLflow is not installed (pip install -e '.[test]')")
    if mlflow_command() is None:
        pytest.skip("the mlflow command is not installed")
    with MlflowServer(tmp_path_factory.mktemp("hostile-mlflow")) as server:
        yield server
