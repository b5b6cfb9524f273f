"""Shards in S3 or an S3-compatible store, through boto3.

boto3 reads ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
``AWS_REGION`` itself. Reads are retried with exponential backoff for ``RETRY_S`` seconds,
so a store that restarts mid-epoch costs a pause, not the run; the errors a user can fix
(credentials, a missing bucket or prefix) are one line each.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, TypeVar

from utils.data.shards.index import INDEX
from utils.data.shards.store import missing_index
from utils.errors import ConfigError, DataError

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_S = 120.0  # how long a read waits for the store to answer again
FIRST_WAIT_S, LONGEST_WAIT_S = 0.5, 10.0  # the backoff between tries: doubling from the first to the longest
CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "403"}


def split_url(url: str) -> tuple:
    """``("bucket", "prefix")`` of ``s3://bucket/prefix`` (prefix without slashes at its ends)."""
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise ConfigError(f"'{url}' names no bucket; write s3://bucket/prefix")
    return bucket, prefix.strip("/")


_LOADER: Any = None  # botocore's reader of its service models, parsed once per process and inherited by loader workers


def _session() -> Any:
    """A new boto3 session (the default one keeps the credentials it first read, whatever the environment says
    now) on the process's model loader: a DataLoader worker forked after the index was read makes its client in
    about 0.02 s of CPU instead of 0.12 s parsing the S3 model again."""
    global _LOADER
    import boto3
    import botocore.loaders
    import botocore.session

    if _LOADER is None:
        _LOADER = botocore.loaders.create_loader()
    core = botocore.session.Session()
    core.register_component("data_loader", _LOADER)
    return boto3.session.Session(botocore_session=core)


class S3Store:
    """The objects under ``s3://bucket/prefix``; a client per process (boto3 clients do not survive a fork)."""

    def __init__(self, url: str) -> None:
        try:
            import boto3  # noqa: F401
        except ImportError:
            raise ConfigError(f"reading {url} needs boto3: pip install boto3 (or the test extra)") from None
        self.url = url.rstrip("/")
        self.bucket, self.prefix = split_url(self.url)
        self._client: Any = None
        self._pid = -1

    def __getstate__(self) -> dict:  # to DataLoader workers: without the parent's client
        return {**self.__dict__, "_client": None, "_pid": -1}

    @property
    def client(self) -> Any:
        if self._client is None or self._pid != os.getpid():
            from botocore.config import Config

            config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=60)
            self._client, self._pid = _session().client("s3", config=config), os.getpid()
        return self._client

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def read(self, name: str) -> bytes:
        return self._retried(
            lambda: self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"].read(), name
        )

    def read_range(self, name: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive) of the object ``name``: one ranged GET."""
        span = f"bytes={start}-{end - 1}"
        return self._retried(
            lambda: self.client.get_object(Bucket=self.bucket, Key=self.key(name), Range=span)["Body"].read(), name
        )

    def download(self, name: str, dest: Path) -> None:
        self._retried(lambda: self.client.download_file(self.bucket, self.key(name), str(dest)), name)

    def upload(self, source: Path, name: str) -> None:
        self._retried(lambda: self.client.upload_file(str(source), self.bucket, self.key(name)), name, writing=True)

    def remove(self, names: List[str]) -> None:
        """Deletes the objects ``names`` (nothing for one that is missing), a thousand a request (S3's most):
        pack's records once its index is written."""
        for start in range(0, len(names), 1000):
            keys = [{"Key": self.key(name)} for name in names[start : start + 1000]]
            self._retried(
                lambda keys=keys: self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True}
                ),
                names[start],
                writing=True,
            )

    def is_empty(self) -> bool:
        """Whether no object lies under the prefix."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        listed = self._retried(lambda: self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1), "")
        return not listed.get("KeyCount", 0)

    def has(self, name: str) -> bool:
        """Whether the object ``name`` exists (``""``: whether the prefix itself names an object)."""
        key = self.key(name) if name else self.prefix
        if not key:
            return False
        listed = self._retried(lambda: self.client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1), "")
        return any(item["Key"] == key for item in listed.get("Contents", []))  # the key itself sorts first

    def splits(self) -> List[str]:
        """The packed splits right under the prefix: those of its first 100 sub-prefixes that hold an index."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        listed = self._retried(
            lambda: self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, Delimiter="/", MaxKeys=100), ""
        )
        names = [entry["Prefix"][len(prefix) :].rstrip("/") for entry in listed.get("CommonPrefixes", [])]
        return sorted(name for name in names if self.has(f"{name}/{INDEX}"))

    def check_bucket(self) -> None:
        """A one-line error now for a missing bucket or refused credentials (before packing)."""
        self._retried(lambda: self.client.head_bucket(Bucket=self.bucket), "")

    def _retried(self, call: Callable[[], T], name: str, writing: bool = False) -> T:
        """``call()``, tried again while the store may be restarting; the errors a user can fix as one line each,
        worded for what the call does (``writing``: an upload, else a read)."""
        from boto3.exceptions import S3TransferFailedError, S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
        from s3transfer.exceptions import RetriesExceededError

        delay, deadline, error = FIRST_WAIT_S, time.monotonic() + RETRY_S, None
        while True:
            try:
                return call()
            except NoCredentialsError:
                raise DataError(
                    f"no credentials for {self.url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                ) from None
            except ClientError as err:
                fatal = self._client_error(err, name, writing)
                if fatal is not None:
                    raise fatal from None
                error = err
            except BotoCoreError as err:  # connection refused, reset or timed out: the store may be restarting
                error = err
            except (S3UploadFailedError, S3TransferFailedError, RetriesExceededError) as err:
                # boto3's transfers wrap the error; a refusal that retrying cannot fix is one line now
                cause = err.__cause__ or err.__context__
                fatal = self._client_error(cause, name, writing) if isinstance(cause, ClientError) else None
                if fatal is not None:
                    raise fatal from None
                error = err
            if time.monotonic() + delay > deadline:
                endpoint = os.environ.get("AWS_ENDPOINT_URL", "AWS")
                raise DataError(
                    f"S3 at {endpoint} failed for {RETRY_S:.0f} s {'writing' if writing else 'reading'} {self.url}/{name} "
                    f"({error}); check the endpoint and try again"
                )
            log.warning(
                "S3 %s %s/%s failed (%s); retrying in %.1f s",
                "upload of" if writing else "read of",
                self.url,
                name,
                error,
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, LONGEST_WAIT_S)

    def _client_error(self, err: Any, name: str, writing: bool = False) -> Optional[DataError]:
        """The one-line error for a refusal a retry cannot fix; None for one worth retrying (5xx, throttling)."""
        code = str(err.response.get("Error", {}).get("Code", ""))
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if status >= 500 or code in ("SlowDown", "Throttling", "RequestTimeout"):
            return None
        if code == "NoSuchBucket" or (not name and status == 404):
            return DataError(f"bucket '{self.bucket}' does not exist at {os.environ.get('AWS_ENDPOINT_URL', 'AWS')}")
        if writing:  # the bucket answered pack's reads first: the credentials may not write, or the key is refused
            fix = (
                f"give credentials that may write to bucket '{self.bucket}' (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
                if code in CREDENTIALS or status == 403
                else "give --output a prefix this store takes"
            )
            said = err.response.get("Error", {}).get("Message") or code
            return DataError(
                f"S3 refused writing {self.url}/{name} ({code}: {said}); {fix}, then pack again into a new or empty --output"
            )
        if code in CREDENTIALS or status == 403:
            return DataError(
                f"S3 refused the credentials for {self.url} ({code}); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        if code in ("NoSuchKey", "404") or status == 404:
            if name.split("/")[-1] == INDEX:  # the advice a folder gets: the prefix above a split's, another split
                return DataError(missing_index(self, name))
            return DataError(f"shard '{self.url}/{name}' is missing; restore it or pack the data again")
        return DataError(
            f"S3 refused reading {self.url}/{name} ({code}: {err}); check the S3 URL and the store's settings"
        )
