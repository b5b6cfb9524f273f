"""--mode predict: a checkpoint on new images scores as --mode test does, once per input over all ranks."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

import main
from tests.fixtures.dist_utils import run, torchrun


def read_csv(path: Path) -> list:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_predictions_score_the_test_modes_top1_and_two_ranks_give_the_same_rows(trained, tmp_path, capsys):
    checkpoint, folder = str(trained["checkpoint"]), trained["data"] / "val"
    assert main.main(["--mode", "test", "--checkpoint", checkpoint, "data.test_split=val"]) == 0
    top1 = float(re.search(r"top1=([\d.]+)", capsys.readouterr().out).group(1))

    assert main.main(["--mode", "predict", "--checkpoint", checkpoint, "--input", str(folder)]) == 0
    assert "predict: inputs=12 predicted=12" in capsys.readouterr().out
    (run_dir,) = sorted((trained["out"] / "apps").glob("predict_*"))  # a folder of its own, not the training run's
    rows = read_csv(run_dir / "predictions.csv")
    assert [r["path"] for r in rows] == sorted(str(p) for p in folder.rglob("*.png"))
    correct = sum(Path(r["path"]).parent.name == r["prediction"] for r in rows)
    assert f"{correct / len(rows):.4f}" == f"{top1:.4f}"
    assert set(rows[0]) >= {"path", "prediction", "score", "top1_class", "top1_prob", "top3_class", "top3_prob"}

    two = run(
        torchrun(
            2,
            "--mode",
            "predict",
            "--checkpoint",
            checkpoint,
            "--input",
            str(folder / "*" / "*.png"),
            "--output",
            str(tmp_path / "two"),
        ),
        timeout=180,
    )
    assert two.returncode == 0, two.stderr[-2000:]
    rows2 = read_csv(tmp_path / "two" / "predictions.csv")
    assert [(r["path"], r["prediction"], r["top2_class"]) for r in rows2] == [
        (r["path"], r["prediction"], r["top2_class"]) for r in rows
    ]
    assert max(abs(float(a["score"]) - float(b["score"])) for a, b in zip(rows, rows2)) < 1e-5


def test_unreadable_inputs_follow_on_bad_sample(trained, tmp_path, capsys):
    folder = tmp_path / "mixed"
    folder.mkdir()
    for image in sorted((trained["data"] / "val" / "one").glob("*.png"))[:2]:
        (folder / image.name).write_bytes(image.read_bytes())
    (folder / "broken.png").write_bytes(b"not an image")
    args = ["--mode", "predict", "--checkpoint", str(trained["checkpoint"]), "--input", str(folder)]
    assert main.main([*args, "--output", str(tmp_path / "stopped")]) == 2
    # the console log is on stderr too
    (err,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert err.startswith("error: ") and "broken.png" in err and "on_bad_sample=skip" in err
    assert main.main([*args, "--output", str(tmp_path / "out"), "data.args.on_bad_sample=skip"]) == 0
    assert [Path(r["path"]).name for r in read_csv(tmp_path / "out" / "predictions.csv")] == sorted(
        p.name for p in folder.glob("val_*.png")
    )
    assert (
        main.main(
            ["--mode", "predict", "--checkpoint", str(trained["checkpoint"]), "--input", str(tmp_path / "nothing*.png")]
        )
        == 2
    )
    assert "not a file, a folder or a glob" in capsys.readouterr().err
