"""MLflow as a tracker: one MLflow run per run folder, continued by every resume.

The run is created at the first send (the server may be down when training starts) with the tag
``regtrain.folder_id``, a random id the spool's identity holds before the run exists: a process killed between
creating the run and saving its id finds it again by that tag instead of making a second one. Records go in
``log_batch`` calls (MLflow's limits: 1000 metrics, 100 params, 100 tags a call); a batch sent twice (the
process died before it saved ``sent``) changes nothing: MLflow's store drops a metric value it already holds
at the same key, step, time and value, and a param given again with its value.

The client retries nothing itself (``MLFLOW_HTTP_REQUEST_MAX_RETRIES=0``, a 10 s request timeout, unless the
environment sets them): the sender's own retry keeps the records and never holds training.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from utils.errors import ConfigError, OutputError
from utils.secret_text import reveal
from utils.trackers.sender import RefusedError
from utils.trackers.spool import Record, Spool

log = logging.getLogger(__name__)

MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100
MAX_PARAM_LENGTH = 6000  # MLflow refuses a longer param value
FOLDER_TAG = "regtrain.folder_id"
NOT_IN_NAMES = re.compile(r"[^/\w.\- ]")  # MLflow's names: letters, digits, _ - . space / (':' not on Windows)
ARTIFACTS = "mlartifacts"  # beside a SQLite store: where its experiments keep files (MLflow's default: ./mlruns)


# MLflow 3's stores (its file store is in maintenance mode: it refuses it unless told otherwise, and a batch sent to it
# twice is kept twice, where the sender counts on a database dropping what it holds already)
URI_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "databricks-uc")


def checked_uri(uri: Optional[str], source: str = "hook 'mlflow'") -> str:
    """The tracking URI, a relative SQLite path made absolute (``sync`` may run elsewhere); ConfigError for
    none and for a scheme MLflow has no store for (``source``: where the URI was given, for the message)."""
    if not uri:
        raise ConfigError(
            "hook 'mlflow' needs a tracking URI: hooks=[{name: mlflow, tracking_uri: http://HOST:5000}] "
            "or the environment variable MLFLOW_TRACKING_URI"
        )
    scheme = uri.split("://", 1)[0].split("+", 1)[0].lower() if "://" in uri else ""
    if scheme not in URI_SCHEMES:
        raise ConfigError(
            f"{source}: tracking_uri '{uri}' is no MLflow store this hook uses; give http(s)://HOST:PORT (a "
            "server) or a database, e.g. sqlite:///PATH/mlflow.db"
        )
    if uri.startswith("sqlite:///"):  # one spelling a file: relative (SQLAlchemy's sqlite:///x) or through links
        return f"sqlite:///{Path(uri[len('sqlite:///') :]).resolve()}"
    return uri


class MlflowBackend:
    name = "mlflow"

    def __init__(
        self, tracking_uri: str, experiment: str, run_name: str, parent: Optional[Dict[str, str]] = None
    ) -> None:
        """``parent``: a sweep's (``study``: the parent run's id is kept beside the sweep's runs, ``sweep_parent.py``)."""
        self.where = tracking_uri
        self.experiment, self.run_name, self.parent = experiment, run_name, parent
        self.client: Any = None  # made in open(), in the sender's thread: importing mlflow takes a second of CPU
        self.run_id: Optional[str] = None
        self.renamed: Set[str] = set()  # the names said renamed (once each)

    @staticmethod
    def quiet_client() -> None:
        """No retries and a short timeout in MLflow's client, unless the environment sets them: the sender retries."""
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")

    @classmethod
    def from_identity(cls, identity: Dict[str, Any], tracking_uri: Optional[str]) -> "MlflowBackend":
        """The backend of the tracker run a spool's identity names (a resume, ``python -m utils.trackers sync``), in
        the store the user names, ``tracking_uri`` (compared with the identity's already: ``destinations.py``,
        ``hooks.unchanged``); None only where nothing will be sent: the identity's, which is never asked."""
        parent = identity.get("parent")
        return cls(
            tracking_uri or checked_uri(identity["tracking_uri"], "the tracker run's identity (trackers/mlflow.json)"),
            identity["experiment"],
            identity["run_name"],
            {"study": parent["study"]} if parent else None,  # where its file lies: from the spool's folder
        )

    def identity(self) -> Dict[str, Any]:
        return {
            "backend": self.name,
            "tracking_uri": self.where,
            "experiment": self.experiment,
            "run_name": self.run_name,
            "parent": self.parent,
        }

    @staticmethod
    def outages() -> Tuple[type, ...]:
        """What the client raises when the server cannot be reached, or answers with an error (``failure`` tells
        which); anything else is a bug, said with its traceback."""
        import requests
        from mlflow.exceptions import MlflowException

        return (OSError, requests.RequestException, MlflowException)

    @staticmethod
    def failure(err: BaseException) -> str:
        """``outage`` (no answer, a timeout, a server error or a rate limit: try again later) or ``refused`` (the
        server answered that it will not take these records: trying again will not help)."""
        from mlflow.exceptions import MlflowException, RestException

        transient = ("INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED")
        if isinstance(err, RestException) and err.error_code not in transient:
            return "refused"
        if isinstance(err, MlflowException) and err.error_code == "INVALID_PARAMETER_VALUE":  # a store in-process
            return "refused"
        return "outage"

    def experiment_id(self) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(self.experiment)
        if found is not None:
            if found.lifecycle_stage != "active":
                raise RefusedError(
                    f"MLflow experiment '{self.experiment}' is deleted: restore it (mlflow experiments restore "
                    f"--experiment-id {found.experiment_id}) or name another with hooks=[{{name: mlflow, experiment: NAME}}]"
                )
            return found.experiment_id
        try:
            return self.client.create_experiment(self.experiment, artifact_location=self.artifacts())
        except MlflowException:
            found = self.client.get_experiment_by_name(self.experiment)  # another process created it first
            if found is None:
                raise  # no: the server refused the name
            return found.experiment_id

    def artifacts(self) -> Optional[str]:
        """Where a new experiment keeps its files: beside a SQLite store's file (MLflow would use ``./mlruns`` of the
        working directory, wherever the run or ``sync`` started); a server or another database decides itself."""
        if not self.where.startswith("sqlite:///"):
            return None
        return (Path(self.where[len("sqlite:///") :]).parent / ARTIFACTS).resolve().as_uri()

    def open(self, spool: Spool) -> None:
        """Continue the run the spool names, or the one tagged with its folder id, or create it."""
        if self.client is None:
            self.quiet_client()
            from mlflow.tracking import MlflowClient

            self.client = MlflowClient(tracking_uri=reveal(self.where))  # the password only here (utils/secret_text.py)
        self.run_id = spool.identity.get("run_id")
        if self.run_id is not None:
            self.owned(spool)
            return
        experiment_id = self.experiment_id()
        folder_id = spool.identity["folder_id"]
        found = self.client.search_runs([experiment_id], f"tags.`{FOLDER_TAG}` = '{folder_id}'", max_results=1)
        if found:
            self.run_id = found[0].info.run_id
        else:
            tags = {FOLDER_TAG: folder_id}
            if self.parent:
                from utils.trackers.sweep_parent import parent_file, parent_run, sweep_key

                study = self.parent["study"]
                key = sweep_key(study, self.where, self.experiment)
                file = parent_file(spool.folder.parent.parent, key)
                tags["mlflow.parentRunId"] = parent_run(self.client, experiment_id, study, key, file)
                spool.save_identity(parent_run_id=tags["mlflow.parentRunId"])  # where --mode compare can write
            self.run_id = self.client.create_run(experiment_id, tags=tags, run_name=self.run_name).info.run_id
        spool.save_identity(run_id=self.run_id, experiment_id=experiment_id)
        address = f"{self.where.rstrip('/')}/#/experiments/{experiment_id}/runs/{self.run_id}"
        log.info("tracker mlflow: run %s (%s)", self.run_id, address if self.where.startswith("http") else self.where)

    def owned(self, spool: Spool) -> None:
        """OutputError unless the run the identity names (``run_id``) is this folder's: tagged with its folder id. A
        handed identity could name anyone's run; nothing is written to it before this check."""
        tag = self.client.get_run(self.run_id).data.tags.get(FOLDER_TAG)
        folder_id = spool.identity.get("folder_id")
        if tag is None or tag != folder_id:
            raise OutputError(
                f"'{spool.identity_path}' names MLflow run {self.run_id}, which is not this folder's (its {FOLDER_TAG} "
                f"is {tag!r}, this folder's {folder_id!r}); nothing was written to it: restore the identity from a "
                "copy, or remove the run's trackers/ folder to start a new tracker run"
            )

    def send(self, records: Sequence[Record]) -> bool:
        """``records`` in order: values, params and tags in batches; a status or an upload where it stands. The
        server has them once the calls returned."""
        from mlflow.entities import Metric, Param, RunTag

        metrics: List[Any] = []
        params: List[Any] = []
        tags: List[Any] = []

        def flush() -> None:
            for kind, items, limit in (
                ("metrics", metrics, MAX_METRICS),
                ("params", params, MAX_PARAMS),
                ("tags", tags, MAX_TAGS),
            ):
                for chunk in range(0, len(items), limit):
                    self.client.log_batch(self.run_id, **{kind: items[chunk : chunk + limit]}, synchronous=True)
                items.clear()

        for record in records:
            if "metrics" in record:
                metrics.extend(
                    Metric(self.name_of(k), v, record["t"], record["step"]) for k, v in record["metrics"].items()
                )
            elif "params" in record:
                params.extend(Param(self.name_of(k), param_value(v)) for k, v in record["params"].items())
            elif "tags" in record:
                tags.extend(RunTag(self.name_of(k), param_value(v)) for k, v in record["tags"].items())
            else:
                flush()
                if "status" in record:
                    self._status(record)
                elif "artifact" in record and Path(record["artifact"]).is_file():
                    self.client.log_artifact(self.run_id, record["artifact"], "checkpoints")
        flush()
        return True

    def name_of(self, key: str) -> str:
        """``key`` as MLflow takes it (``mlflow_name``), said once where that is another name."""
        name = mlflow_name(key)
        if name != key and key not in self.renamed:
            self.renamed.add(key)
            log.warning("tracker mlflow: '%s' is no MLflow name (%s); it is logged as '%s'", key, NAMES, name)
        return name

    def _status(self, record: Record) -> None:
        # update_run, not set_terminated, which writes the run's address to stdout from this thread, where it could
        # cut into the lines scripts read (the address is logged once when the run opens)
        self.client.update_run(self.run_id, status=record["status"])

    def close(self) -> bool:
        return True  # the server kept every batch it answered


def param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."


MAX_NAME = 250  # MLflow refuses a longer metric, param or tag name (its whole batch, at every try)
NAME_HASH = 10  # hex digits of the hash that ends a shortened name
NAMES = (
    f"MLflow's names hold letters, digits and _ - . / and spaces, at most {MAX_NAME} characters (a longer one keeps "
    f"its first {MAX_NAME - NAME_HASH - 1} and '-' and a hash of the whole name), and are no path leaving their place"
)


def mlflow_name(key: str) -> str:
    """``key`` as a name MLflow takes: each other character as ``_``, and no empty, ``.`` or ``..`` part between
    slashes (MLflow treats names as paths: ``val/mAP@0.5`` is logged as ``val/mAP_0.5``); one longer than
    ``MAX_NAME`` keeps its beginning and ends with ``-`` and the first ``NAME_HASH`` hex digits of the sha256 of
    ``key``, so two long names that begin alike stay two (``docs/trackers.md``)."""
    parts = [part for part in NOT_IN_NAMES.sub("_", key).split("/") if part not in ("", ".")]
    name = "/".join("__" if part == ".." else part for part in parts) or "_"
    name = name if posixpath.normpath(name) == name else name.replace(".", "_")
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:NAME_HASH]
    return f"{name[: MAX_NAME - NAME_HASH - 1]}-{digest}"  # the last part gains the '-': never '', '.' or '..'
