"""Prefetching loaders: same batches, errors surface promptly, no threads left behind."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from utils.config.load import load_config
from utils.data import build_dataset, build_train_loader
from utils.data.prefetch import PrefetchLoader, ThreadPrefetcher, resolve_mode
from utils.errors import ConfigError


class Numbers(Dataset):
    """Item i is (tensor [i, i], i); item ``fail_at`` raises."""

    def __init__(self, n: int = 40, fail_at: int = -1, delay: float = 0.0) -> None:
        self.n, self.fail_at, self.delay = n, fail_at, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.delay)
        if i == self.fail_at:
            raise OSError(f"corrupt file for item {i}")
        return torch.tensor([float(i), float(i)]), i


def _prefetch_threads():
    return [t for t in threading.enumerate() if isinstance(t, ThreadPrefetcher) and t.is_alive()]


def _batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=pytest.mark.slow)])  # 2: worker processes
def test_train_loader_yields_the_same_batches_in_order_as_without_prefetch(num_workers):
    overrides = ["data.batch_size=32", f"data.num_workers={num_workers}"]
    plain_cfg = load_config(None, overrides + ["data.prefetch=none"])
    thread_cfg = load_config(None, overrides + ["data.prefetch=thread", "data.prefetch_depth=3"])
    dataset = build_dataset(plain_cfg.data, "train")
    plain = build_train_loader(dataset, plain_cfg.data, 0, 1, seed=3)
    thread = build_train_loader(dataset, thread_cfg.data, 0, 1, seed=3)
    assert thread.mode == "thread" and plain.mode == "none"
    assert len(thread) == len(plain) == len(dataset) // 32
    for epoch in (0, 1):  # set_epoch reaches the sampler through the wrapper
        plain.sampler.set_epoch(epoch)
        thread.sampler.set_epoch(epoch)
        a, b = _batches(plain), _batches(thread)
        assert len(a) == len(b) == len(plain)
        for (xa, ya), (xb, yb) in zip(a, b):
            assert torch.equal(xa, xb) and torch.equal(ya, yb)
    # the order is seeded: the comparison can fail
    assert not torch.equal(
        _batches(plain)[0][1], _batches(build_train_loader(dataset, plain_cfg.data, 0, 1, seed=10))[0][1]
    )


def test_auto_mode_is_thread_on_cpu_and_cuda_needs_a_gpu():
    assert resolve_mode("auto", torch.device("cpu")) == "thread"
    assert resolve_mode("auto", torch.device("cuda", 0)) == "cuda"
    with pytest.raises(
        ConfigError, match=r"data.prefetch=cuda needs a CUDA device, but .*; use data.prefetch=thread or auto"
    ):
        resolve_mode("cuda", torch.device("cpu"))


@pytest.mark.timeout(20)
@pytest.mark.parametrize("fail_at", [0, 9])
@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=pytest.mark.slow)])  # 2: worker processes
def test_a_failing_dataset_raises_in_the_loop_within_a_second(fail_at, num_workers):
    loader = PrefetchLoader(
        DataLoader(Numbers(fail_at=fail_at), batch_size=4, num_workers=num_workers), "thread", depth=2
    )
    seen = []
    iterator = iter(loader)
    start = time.monotonic()
    with pytest.raises(OSError, match=f"corrupt file for item {fail_at}"):
        for _, y in iterator:
            seen.extend(y.tolist())
    elapsed = time.monotonic() - start
    assert elapsed < 1.0 + (2.0 if num_workers else 0.0)  # the budget with workers includes starting 2 processes
    assert seen == list(range(fail_at - fail_at % 4))  # every good batch before the bad one arrived, in order
    time.sleep(0.2)
    assert not _prefetch_threads()
    # the loader's workers ended with the thread (left to the garbage collector, a later test's thread paid 5 s each)
    assert not multiprocessing.active_children()


@pytest.mark.timeout(20)
def test_a_failing_dataset_raises_within_a_second_in_the_framework_loop():
    from utils.amp import Amp
    from utils.config.schema import AmpConfig
    from utils.engine.trainer import Trainer
    from utils.engine.trainer_types import LoopOptions, Parts

    loader = PrefetchLoader(DataLoader(Numbers(fail_at=10, delay=0.001), batch_size=4), "thread", depth=2)
    model = torch.nn.Linear(2, 40)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    parts = Parts(
        model,
        torch.nn.functional.cross_entropy,
        Amp(AmpConfig(), torch.device("cpu")),
        opt,
        torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0),
        train_loader=loader,
    )

    start = time.monotonic()
    with pytest.raises(OSError, match="corrupt file for item 10"):
        Trainer(parts, LoopOptions()).fit()
    assert time.monotonic() - start < 1.0


@pytest.mark.timeout(20)
@pytest.mark.parametrize("how", ["break", "exception"])
def test_leaving_the_loop_early_ends_the_thread(how):
    # A slow, long source: the producer fills its queue and blocks on put until told to stop.
    loader = PrefetchLoader(DataLoader(Numbers(n=10_000), batch_size=2), "thread", depth=2)

    def consume():
        for i, _ in enumerate(loader):
            if i == 3:
                if how == "break":
                    break
                raise KeyError("consumer failed")

    if how == "break":
        consume()
    else:
        with pytest.raises(KeyError):
            consume()
    deadline = time.monotonic() + 5
    while _prefetch_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _prefetch_threads()


def test_prefetch_loader_normalizes_inputs_when_mean_and_std_are_given():
    loader = PrefetchLoader(
        DataLoader([(torch.full((3, 2, 2), 0.5), 0)] * 4, batch_size=2),
        "thread",
        2,
        mean=[0.5, 0.25, 0.0],
        std=[1.0, 0.25, 0.5],
    )
    x, _ = next(iter(loader))
    assert torch.allclose(x[:, 0], torch.zeros(2, 2, 2)) and torch.allclose(x[:, 1], torch.ones(2, 2, 2))
    assert torch.allclose(x[:, 2], torch.ones(2, 2, 2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.cuda
def test_cuda_prefetch_yields_the_same_batches_on_the_gpu():
    source = DataLoader(Numbers(n=20), batch_size=4, pin_memory=True)
    loader = PrefetchLoader(source, "cuda", 2, torch.device("cuda", 0))
    stream = loader.cuda.stream
    for _epoch in range(2):
        for (xa, ya), (xb, yb) in zip(source, loader):
            assert xb.is_cuda and torch.equal(xa, xb.cpu()) and torch.equal(ya, yb.cpu())
    assert loader.cuda.stream is stream  # one stream per loader


@pytest.mark.parametrize("batch_size", [None, 2])
def test_normalizing_never_changes_the_tensors_a_dataset_keeps(batch_size):
    """Stacked batches (new tensors) are normalized in place; tensors handed over as they are, never."""
    stored = (
        [(torch.full((2, 3, 2, 2), 0.5), torch.zeros(2))] * 2
        if batch_size is None
        else [(torch.full((3, 2, 2), 0.5), 0)] * 4
    )
    loader = PrefetchLoader(DataLoader(stored, batch_size=batch_size), "thread", 2, mean=[0.5] * 3, std=[0.25] * 3)
    assert all(torch.equal(x, torch.zeros_like(x)) for x, _ in loader)
    assert all(torch.equal(x, torch.full_like(x, 0.5)) for x, _ in stored)
