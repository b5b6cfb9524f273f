"""Shards in a real S3 server (SeaweedFS, tests/shards/conftest.py): pack, train through a small cache, faults."""

from __future__ import annotations

import csv
import io
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest
import torch

import main
from tests.apps.conftest import folder_overrides, make_digit_folder
from tests.fixtures.seaweed import READ_ONLY
from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.data.predict_shards import packed_split
from utils.data.shards import s3
from utils.data.shards.s3 import S3Store
from utils.errors import DataError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def printed(capsys, prefix: str) -> str:
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith(prefix))


def errors(capsys) -> list:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


def packed(tmp_path, capsys, url: str) -> list:
    """The digit folder packed into ``url`` in shards of about 4 KB (4 samples); the training overrides."""
    data = make_digit_folder(tmp_path / "data")
    overrides = folder_overrides(tmp_path / "out", data) + ["train.epochs=1"]
    assert main.main(["--mode", "pack", "--output", url, "--shard-size", "4KB", *overrides]) == 0
    capsys.readouterr()
    return overrides


def test_pack_to_s3_and_train_through_a_quarter_size_cache_as_from_local_shards(tmp_path, capsys, s3_env):
    url = f"s3://{s3_env.bucket()}/digits/v1"
    overrides = packed(tmp_path, capsys, url)
    local = tmp_path / "local"
    assert main.main(["--mode", "pack", "--output", str(local), "--shard-size", "4KB", *overrides]) == 0
    names = sorted(o["Key"] for o in s3_env.client().list_objects_v2(Bucket=url.split("/")[2])["Contents"])
    assert "digits/v1/train/index.json" in names and "digits/v1/train/shard-000007.tar" in names
    total = sum(p.stat().st_size for p in (local / "train").glob("*.tar"))
    assert main.main(overrides + ["data.name=shards", f"data.root={local}"]) == 0
    from_local = printed(capsys, "test:")

    cache = tmp_path / "cache"
    limit = total // 4  # the training split is four times the cache
    args = f"data.args={{channels: 1, cache_limit: {limit}, cache_dir: '{cache}'}}"
    assert main.main(overrides + ["data.name=shards", f"data.root={url}", args, "data.num_workers=2"]) == 0
    assert printed(capsys, "test:") == from_local
    kept = sum(p.stat().st_size for p in cache.glob("*.tar"))
    assert 0 < kept <= limit + 8192  # the limit, or the one shard in use beyond it

    # predict from the packed test split in S3: the rows of its image files
    best = str(tmp_path / "out" / "apps" / "run_001" / "checkpoints" / "best.pt")
    rows = {}
    for name, spec in (("files", tmp_path / "data" / "test"), ("s3", f"{url}/test")):
        out = tmp_path / name
        assert main.main(["--mode", "predict", "--checkpoint", best, "--input", str(spec), "--output", str(out)]) == 0
        with open(out / "predictions.csv", newline="") as fh:
            rows[name] = list(csv.DictReader(fh))
    assert [r["path"] for r in rows["s3"]] == [
        f"{url}/test:{Path(r['path']).parent.name}/{Path(r['path']).name}" for r in rows["files"]
    ]
    assert [(r["prediction"], r["score"]) for r in rows["s3"]] == [(r["prediction"], r["score"]) for r in rows["files"]]
    assert main.main(["--mode", "predict", "--checkpoint", best, "--input", f"s3://{url.split('/')[2]}"]) == 2
    assert "names a bucket; name a packed split: s3://bucket/prefix/<split>" in capsys.readouterr().err
    afile = tmp_path / "afile"  # a cache folder predict cannot use: one line, and its folder is taken back
    afile.write_text("mine")
    experiment = tmp_path / "out" / "apps"
    before = sorted(p.name for p in experiment.iterdir())
    bad = [f"data.args.cache_dir={afile}"]
    assert main.main(["--mode", "predict", "--checkpoint", best, "--input", f"{url}/test", *bad]) == 2
    assert errors(capsys)[0].startswith(f"error: data.args.cache_dir '{afile}' is a file;")
    assert sorted(p.name for p in experiment.iterdir()) == before and afile.read_text() == "mine"


def test_a_wrong_root_input_or_missing_shard_gets_the_advice_a_folder_gets(tmp_path, capsys, s3_env):
    url = f"s3://{s3_env.bucket()}/a"
    packed(tmp_path, capsys, url)
    local, bucket = tmp_path / "local", url.split("/")[2]  # the same packed data in a folder
    for item in s3_env.client().list_objects_v2(Bucket=bucket, Prefix="a/")["Contents"]:
        (local / item["Key"][2:]).parent.mkdir(parents=True, exist_ok=True)
        s3_env.client().download_file(bucket, item["Key"], str(local / item["Key"][2:]))

    def said(root: str, split: str) -> str:
        args = {"channels": 1, "cache_dir": str(tmp_path / "cache")}
        with pytest.raises(DataError) as err:
            build_dataset(DataConfig(name="shards", root=root, args=args), split)
        return str(err.value)

    def in_s3(message: str) -> str:  # the local message, in S3's words
        return message.replace(str(local), url).replace("folder", "prefix").replace("a file", "an object")

    for place, split in (("/train", "train"), ("/train/index.json", "train"), ("", "nosuch")):
        assert said(url + place, split) == in_s3(said(f"{local}{place}", split))

    def refused(spec: str) -> str:
        with pytest.raises(DataError) as err:
            packed_split(spec)
        return str(err.value)

    for place in ("", "/train/index.json", "/train/shard-000000.tar"):
        assert refused(url + place) == in_s3(refused(f"{local}{place}"))
    assert packed_split(f"{url}/train") == (url, "train")
    with pytest.raises(DataError, match="holds no packed split .*; name a split --mode pack wrote"):
        packed_split(f"{url}/nosuch")
    s3_env.client().delete_object(Bucket=bucket, Key="a/val/shard-000001.tar")
    shards = build_dataset(
        DataConfig(name="shards", root=url, args={"channels": 1, "cache_dir": str(tmp_path / "c")}), "val"
    )
    with pytest.raises(
        DataError, match=f"^shard '{url}/val/shard-000001.tar' is missing; restore it or pack the data again$"
    ):
        [shards[at] for at in range(len(shards))]


def test_a_corrupt_shard_in_s3_is_one_error_line_naming_it(tmp_path, capsys, s3_env):
    bucket = s3_env.bucket()
    overrides = packed(tmp_path, capsys, f"s3://{bucket}/d")
    key = "d/train/shard-000001.tar"
    body = bytearray(s3_env.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    offset = tarfile.open(fileobj=io.BytesIO(bytes(body))).getmembers()[0].offset_data
    body[offset + 10] ^= 0xFF  # inside a sample's bytes
    s3_env.client().put_object(Bucket=bucket, Key=key, Body=bytes(body))
    args = f"data.args={{channels: 1, cache_dir: '{tmp_path / 'cache'}'}}"
    assert main.main(overrides + ["data.name=shards", f"data.root=s3://{bucket}/d", args]) == 2
    err = errors(capsys)
    assert len(err) == 1 and f"shard 's3://{bucket}/d/train/shard-000001.tar' does not match its sha256" in err[0]
    # a cache too small for any shard: samples are read by byte range and checked alone
    args = f"data.args={{channels: 1, cache_dir: '{tmp_path / 'none'}', cache_limit: 1}}"
    assert main.main(overrides + ["data.name=shards", f"data.root=s3://{bucket}/d", args]) == 2
    err = errors(capsys)
    assert len(err) == 1 and f"shard 's3://{bucket}/d/train/shard-000001.tar' does not match its checksums" in err[0]


def test_missing_bucket_prefix_and_wrong_credentials_are_one_line_each(tmp_path, capsys, s3_env, monkeypatch):
    data = make_digit_folder(tmp_path / "data")
    overrides = folder_overrides(tmp_path / "out", data) + ["data.name=shards"]
    assert main.main(overrides + ["data.root=s3://no-such-bucket-here/x"]) == 2
    assert errors(capsys) == [f"error: bucket 'no-such-bucket-here' does not exist at {s3_env.endpoint}"]
    bucket = s3_env.bucket()
    assert main.main(overrides + [f"data.root=s3://{bucket}/nothing"]) == 2
    err = errors(capsys)
    assert len(err) == 1 and f"'s3://{bucket}/nothing/train/index.json' does not exist" in err[0]
    assert main.main(["--mode", "pack", "--output", "s3://no-such-bucket-here/x", *overrides[:-1]]) == 2
    assert errors(capsys) == [f"error: bucket 'no-such-bucket-here' does not exist at {s3_env.endpoint}"]
    s3_env.client().put_object(Bucket=bucket, Key="used/something", Body=b"x")
    assert main.main(["--mode", "pack", "--output", f"s3://{bucket}/used", *overrides[:-1]]) == 2
    assert errors(capsys) == [
        f"error: --output 's3://{bucket}/used' is not empty; pack into a new or empty folder (or S3 prefix)"
    ]
    long = "k" * 1100  # a key longer than S3 takes (1024 bytes): refused at the first upload, the pack's manifest
    assert main.main(["--mode", "pack", "--output", f"s3://{bucket}/{long}", *overrides[:-1]]) == 2
    err = errors(capsys)
    assert err[0].startswith(f"error: S3 refused writing s3://{bucket}/{long}/.pack/manifest.json (KeyTooLongError")
    assert err[0].endswith("give --output a prefix this store takes, then pack again into a new or empty --output")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", READ_ONLY[0])  # credentials that may read the bucket, not write it
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", READ_ONLY[1])
    assert main.main(["--mode", "pack", "--output", f"s3://{bucket}/ro", *overrides[:-1]]) == 2
    assert errors(capsys) == [
        f"error: S3 refused writing s3://{bucket}/ro/.pack/manifest.json (AccessDenied: Access Denied.); give "
        f"credentials that may write to bucket '{bucket}' (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), then pack again "
        "into a new or empty --output"
    ]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    assert main.main(overrides + [f"data.root=s3://{bucket}/nothing"]) == 2
    err = errors(capsys)
    assert len(err) == 1 and "S3 refused the credentials" in err[0] and "AWS_SECRET_ACCESS_KEY" in err[0]


def test_reads_wait_for_a_restarted_store_and_continue(tmp_path, capsys, caplog, s3_env, monkeypatch):
    monkeypatch.setattr(s3, "LONGEST_WAIT_S", 1.0)  # tries every second: the read goes on soon after the store is back
    bucket = s3_env.bucket()
    packed(tmp_path, capsys, f"s3://{bucket}/d")
    cfg = DataConfig(name="shards", root=f"s3://{bucket}/d", args={"channels": 1, "cache_dir": str(tmp_path / "c")})
    dataset = build_dataset(cfg, "train")
    first = dataset[0][0]
    s3_env.stop(gateway_only=True)  # the S3 endpoint refuses connections for 2 s, then answers again
    restarted = threading.Thread(target=lambda: (time.sleep(2), s3_env.start()))
    restarted.start()
    try:
        late = dataset[len(dataset) - 1]  # another shard: fetched while the store is down, then when it is back
    finally:
        restarted.join()
    assert late[0].shape == first.shape and dataset.source.reader.cache is not None
    assert any("retrying in" in r.getMessage() for r in caplog.records)  # it did wait for the store


def test_a_window_order_fetches_each_shard_whole_once_an_epoch_through_a_small_cache(
    tmp_path, capsys, s3_env, monkeypatch
):
    """The default order through a quarter-size cache reads most samples by range (above); with
    shuffle_window the cache evicts the least recently used shard and every read is of a cached shard."""
    url = f"s3://{s3_env.bucket()}/w"
    overrides = packed(tmp_path, capsys, url)
    downloads, ranged = [], []
    download, read_range = S3Store.download, S3Store.read_range
    monkeypatch.setattr(
        S3Store, "download", lambda self, name, dest: (downloads.append(name), download(self, name, dest))[1]
    )
    monkeypatch.setattr(
        S3Store, "read_range", lambda self, name, *span: (ranged.append(name), read_range(self, name, *span))[1]
    )
    shards = DataConfig(name="shards", root=url, args={"channels": 1})
    index = build_dataset(shards, "train").source.index
    limit = 3 * max(shard.bytes for shard in index.shards)  # 3 of the 8 training shards
    cache = tmp_path / "cache"
    args = f"data.args={{channels: 1, shuffle_window: 2, cache_limit: {limit}, cache_dir: '{cache}'}}"
    run = ["data.name=shards", f"data.root={url}", args, "data.num_workers=0", "train.epochs=2"]
    assert main.main(overrides + run) == 0
    capsys.readouterr()
    train = [name for name in downloads if name.startswith("train/") and name.endswith(".tar")]
    names = {f"train/{shard.name}" for shard in index.shards}
    assert ranged == [] and set(train) == names and len(train) <= 2 * len(names), (ranged, train)
    assert sum(p.stat().st_size for p in cache.glob("*.tar")) <= limit


class FirstReadThenWait(torch.utils.data.Dataset):
    """In a loader worker: reads one sample of a remote split; whether a fill thread started, and how many
    shards the cache holds once it has all of them (or after 60 s, or at once without a fill)."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return 1

    def __getitem__(self, _: int) -> tuple:
        self.dataset[0]
        filling = any(thread.name == "shard-fill" for thread in threading.enumerate())
        cache, deadline = self.dataset.source.reader.cache, time.monotonic() + 60
        while filling and len(list(cache.folder.glob("*.tar"))) < len(self.dataset.source.index.shards):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return filling, len(list(cache.folder.glob("*.tar")))


def test_a_loader_worker_fills_a_cache_that_holds_the_split_and_the_main_process_never_does(tmp_path, capsys, s3_env):
    url = f"s3://{s3_env.bucket()}/f"
    packed(tmp_path, capsys, url)
    args = {"channels": 1, "cache_dir": str(tmp_path / "cache")}
    dataset = build_dataset(DataConfig(name="shards", root=url, args=args), "train")
    dataset[0]  # in the main process: that one shard, no thread (the workers are forked from here)
    assert len(list((tmp_path / "cache").glob("*.tar"))) == 1
    assert not [t for t in threading.enumerate() if t.name == "shard-fill"]
    (tmp_path / "cache" / f".{'0' * 20}-train-x.tar.999999999.part").write_bytes(b"left by a dead process")
    (tmp_path / "cache" / f".{'0' * 20}-train-y.tar.{os.getpid()}.part").write_bytes(b"a live download")
    loader = torch.utils.data.DataLoader(FirstReadThenWait(dataset), num_workers=1, batch_size=None)
    assert list(loader) == [[True, len(dataset.source.index.shards)]]  # one read in the worker: every shard arrives
    assert [p.name.split(".")[1] for p in (tmp_path / "cache").glob(".*.part")] == [f"{'0' * 20}-train-y"]
    small = {**args, "cache_dir": str(tmp_path / "small"), "cache_limit": dataset.source.index.shards[0].bytes * 3}
    split_larger = build_dataset(DataConfig(name="shards", root=url, args=small), "train")
    assert list(torch.utils.data.DataLoader(FirstReadThenWait(split_larger), num_workers=1, batch_size=None)) == [
        [False, 1]
    ]
