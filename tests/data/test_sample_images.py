"""``python -m utils.data.sample_images DIR``: images to try predict on, as the quick start's model reads them.

docs/predict-export.md's example predicts them with the quick start's checkpoint (tests/cli/test_readme.py runs it);
here: which images, their pixels read back as predict reads a file, and the folders it refuses."""

from __future__ import annotations

from utils.data.datasets.digits import Digits
from utils.data.images import read_image
from utils.data.sample_images import main, write_samples


def test_one_test_image_of_each_digit_reads_back_as_the_network_tested_it(tmp_path):
    paths = write_samples(tmp_path / "samples")
    test = Digits("test")
    assert sorted(p.name.split("_")[0] for p in paths) == [f"digit{d}" for d in range(10)]
    for path in paths:
        at = int(path.stem.split("_")[1])
        assert path.name.startswith(f"digit{int(test.labels[at])}_")  # the name tells the true digit
        # predict's reader (utils/data/images.py) gives back the test image to half a grey level
        assert (read_image(path, channels=1) - test.images[at]).abs().max() <= 0.5 / 255 + 1e-6
    assert len(write_samples(tmp_path / "more", count=25)) == 25


def test_a_run_folder_or_a_bad_count_is_one_error_line(tmp_path, capsys):
    run = tmp_path / "exp" / "run_001"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("{}\n")
    assert main([str(run / "samples")]) == 2
    assert "lies inside the run folder" in capsys.readouterr().err and not (run / "samples").exists()
    assert main([str(tmp_path / "x"), "--count", "0"]) == 2
    assert "--count must be 1 to 360" in capsys.readouterr().err


def test_the_command_prints_what_it_wrote(tmp_path, capsys):
    assert main([str(tmp_path / "s"), "--count", "3"]) == 0
    assert capsys.readouterr().out == f"sample_images: images=3 folder={tmp_path / 's'}\n"
    assert len(list((tmp_path / "s").glob("digit*.png"))) == 3
