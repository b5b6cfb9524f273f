"""A packed copy of a dataset gives the test metrics of the original for the same checkpoint, and trains alike."""

from __future__ import annotations

import pytest

import main
from tests.apps.conftest import folder_overrides, make_digit_folder


def printed(capsys, prefix: str) -> str:
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith(prefix))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_packed_image_folder_tests_and_trains_as_the_folder(tmp_path, capsys):
    data, out = make_digit_folder(tmp_path / "data"), tmp_path / "out"
    overrides = folder_overrides(out, data) + ["train.epochs=3"]
    assert main.main(overrides) == 0
    trained = printed(capsys, "test:")
    best = out / "apps" / "run_001" / "checkpoints" / "best.pt"
    shards = tmp_path / "shards"
    assert main.main(["--mode", "pack", "--output", str(shards), *overrides]) == 0
    capsys.readouterr()

    for source in ([], ["data.name=shards", f"data.root={shards}"]):
        assert main.main(["--mode", "test", "--checkpoint", str(best), *source]) == 0
        assert printed(capsys, "test:") == "test" + trained[len("test") :]

    # training from the shards, through 2 DataLoader workers: the same run, step for step
    from_shards = overrides + ["data.name=shards", f"data.root={shards}", "data.num_workers=2"]
    assert main.main(from_shards) == 0
    assert printed(capsys, "test:") == trained
