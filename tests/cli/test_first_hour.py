"""What a new user meets in the first hour: the CPU threads a run chooses and says it chose, counts printed
as counts, and the DALI line of docs/speed.md accepted as written up to the point where DALI itself is needed."""

from __future__ import annotations

import logging
import re
import shlex
import subprocess
import sys

import pytest
import torch

import main
from tests.conftest import ROOT, fast_overrides, subprocess_env
from tests.fixtures.bad_input import error_line
from tests.fixtures.docs_pages import all_text
from utils.config.load import load_config
from utils.config.schema import config_yaml
from utils.log import best_line, format_metrics, setup_logging, wall_time
from utils.registry import METRICS
from utils.threads import choose_threads, usable_cores


def test_threads_come_from_the_setting_then_omp_num_threads_then_the_usable_cores():
    assert choose_threads(3, {}).count == 3
    # torch read it already
    assert choose_threads(None, {"OMP_NUM_THREADS": "1"}) == (
        torch.get_num_threads(),
        "OMP_NUM_THREADS=1",
    )
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(usable_cores() + 3)  # more than the process may use: the usable cores
        assert choose_threads(None, {}) == (usable_cores(), f"{usable_cores()} usable cores")
        torch.set_num_threads(1)  # chosen by the program that calls main() (as tests/conftest.py does): kept
        assert choose_threads(None, {}).count == 1
    finally:
        torch.set_num_threads(before)
    shared = choose_threads(None, {"LOCAL_WORLD_SIZE": str(usable_cores() * 2)})  # more processes than cores: one each
    assert shared.count == 1 and shared.source.endswith(f"/ {usable_cores() * 2} processes")


def spin_settings(**env_values):
    """GOMP_SPINCOUNT and OMP_WAIT_POLICY as ``import main`` leaves them in a fresh process started with ``env_values``."""
    env = {k: v for k, v in subprocess_env().items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = "import os, sys; import main; print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, **env_values},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.split()


@pytest.mark.slow  # three fresh processes
def test_main_makes_waiting_threads_sleep_soon_unless_the_user_chose():
    """OpenMP's threads spinning while they waited made the quick start 7x slower beside another torch job."""
    # set on import, before torch (which the mode's command imports) loads OpenMP
    assert spin_settings() == ["3000", "None", "False"]
    assert spin_settings(OMP_WAIT_POLICY="ACTIVE") == ["None", "ACTIVE", "False"]
    assert spin_settings(GOMP_SPINCOUNT="50") == ["50", "None", "False"]


def test_the_start_line_names_the_threads_and_counts_print_as_counts(tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.INFO)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    threads = torch.get_num_threads()  # tests/conftest.py's 1: what main() keeps when threads is not set
    assert main.main([*fast_overrides(tmp_path, "t", epochs=1), "train.iterations=2"]) == 0
    assert torch.get_num_threads() == threads
    cores = usable_cores()
    assert f"{threads} CPU thread{'s' if threads > 1 else ''} ({cores} usable cores; " in caplog.text
    assert re.search(r"epoch 0 train: .* steps=2 skipped_steps=0$", caplog.text, re.M), caplog.text  # was steps=2.0000
    # the run ends on a summary after its test line: the wall time, the best rounded as the test line rounds, the folder
    best = [
        found for line in caplog.messages if (found := re.match(r"best top1=(\d\.\d{4}) at epoch 0; testing ", line))
    ]
    assert best, caplog.messages  # was top1=0.9777777777777777
    assert re.fullmatch(
        rf"done in \d+\.\d s; best top1={best[0].group(1)} at epoch 0; run folder {tmp_path / 't' / 'run_001'}",
        caplog.messages[-1],
    ), caplog.messages[-1]


def test_the_closing_line_s_wall_time_reads_at_a_glance():
    assert [wall_time(s) for s in (0.04, 27.44, 125.0, 3725.0)] == ["0.0 s", "27.4 s", "2 min 05 s", "1 h 02 min"]
    assert best_line("top1", 0.9777777777777777, 5) == "best top1=0.9778 at epoch 5"
    assert best_line("loss", None, None) == "best loss=None at epoch None"  # no validation ran


def test_the_number_of_videos_prints_as_a_whole_number():
    metric = METRICS.build("video")
    metric.update(torch.randn(4, 3), {"label": torch.tensor([0, 0, 1, 1]), "video": torch.tensor([0, 0, 1, 1])})
    assert " videos=2" in " " + format_metrics(metric.result())  # was videos=2.0000


def test_the_readme_dali_line_is_accepted_up_to_dali_itself(tmp_path, capsys):
    """As written it failed on its literal '...' and on model.input_size's single channel; now only a missing
    DALI stops it, before any data is read or any folder made, and with DALI installed only the missing
    ImageNet folder does, before any step."""
    try:
        import nvidia.dali  # noqa: F401

        dali = True
    except ImportError:
        dali = False
    block = re.search(r"```bash\n(python main\.py data\.name=image_folder[^`]*data\.loader=dali[^`]*)```", all_text())
    assert block, "the DALI example of docs/speed.md"
    args = shlex.split(block.group(1).replace("\\\n", " "))[2:]
    root = tmp_path / "imagenet"  # a missing folder where the docs say /data/imagenet: never a real dataset
    args = [f"data.root={root}" if arg.startswith("data.root=") else arg for arg in args]
    assert main.main([*args, f"experiment.output_root={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    if dali:
        assert line.startswith(f"error: data folder '{root / 'train'}' does not exist"), line
    else:
        assert line.startswith("error: data.loader=dali needs NVIDIA DALI, which is not installed") and line.endswith(
            "or use data.loader=torch"
        ), line
        assert "run folder" not in err
    assert not any(tmp_path.iterdir())  # no run folder left, nothing written


def test_print_config_prints_what_config_yaml_would_hold_and_makes_no_run(tmp_path, capsys):
    overrides = [
        f"experiment.output_root={tmp_path / 'output'}",
        "train.epochs=3",
        "data.name=image_folder",
        f"data.root={tmp_path / 'no_such_data'}",  # a run would stop on it: the data is never read
        "model.args={backbone: small_cnn, num_classes: 3}",
    ]
    assert main.main(["--print-config", *overrides]) == 0
    printed = capsys.readouterr().out
    assert printed == config_yaml(load_config(None, overrides))  # save_config writes config.yaml from this
    saved = tmp_path / "printed.yaml"
    saved.write_text(printed)
    assert load_config(saved) == load_config(None, overrides)  # --config reads it back
    assert not (tmp_path / "output").exists()


def test_print_config_is_refused_with_a_sweep():
    with pytest.raises(SystemExit) as stopped:
        main.main(["--print-config", "--sweep", "sweep.yaml"])
    assert stopped.value.code == 2


@pytest.mark.slow  # three runs, forked
def test_a_run_that_diverges_keeps_its_folder_and_says_what_happened(main_server, tmp_path):
    """optim.lr=1e12 said "the last good checkpoint is kept" with none written, advised amp.opt_level=O0 at O0, and
    deleted the run folder, log.txt with it."""
    out = [f"experiment.output_root={tmp_path}", "train.epochs=1"]
    line = error_line(main_server.run([*out, "optim.lr=1e12"], ROOT, subprocess_env(), timeout=240))
    run = tmp_path / "digits_small_cnn" / "run_001"
    assert re.match(r"error: loss is nan at epoch 0, step \d+ \(train.nonfinite=stop\)", line), line
    assert "; no checkpoint of it was written; " in line and f"the run folder {run} and its log.txt stay" in line
    assert line.endswith("lower optim.lr (now 1e+12) or enable train.clip_grad_norm (e.g. 1.0)"), line  # O0: no amp
    assert (run / "log.txt").read_text().splitlines()[-1].endswith(line[len("error: ") :])
    assert (run / "failed.txt").is_file()
    # a NaN after a checkpoint, at O1 with clipping: the checkpoint is named, the advice fits the settings
    nan = ["custom_imports=[tests.fixtures.nan_net]", "model.name=nan_classifier", "train.checkpoint_every_steps=5"]
    more = ["model.args.nan_at=[8]", "amp.opt_level=O1", "train.clip_grad_norm=1.0", "experiment.name=nan"]
    line = error_line(main_server.run([*out, *nan, *more], ROOT, subprocess_env(), timeout=240))
    run = tmp_path / "nan" / "run_001"
    assert f"its checkpoints are kept (the newest, epoch0000_batch000005.pt: --resume {run} continues" in line, line
    assert line.endswith("lower optim.lr (now 0.003) or use amp.opt_level=O0 (now O1)"), line
    # a bare --resume passes the failed run over; naming it continues it
    line = error_line(main_server.run([*out, *nan, "experiment.name=nan", "--resume"], ROOT, subprocess_env(), 240))
    assert line.startswith(
        f"error: --resume: the newest run of '{run.parent}' with a checkpoint, run_001, failed (loss"
    )
    assert f"continued only when named: --resume {run}" in line, line


def test_rank_1_leaves_the_warnings_every_rank_gives_to_rank_0(capsys):
    """Under torchrun every warning of the config and the data printed twice, once with rank 1's prefix."""
    try:
        setup_logging(None, rank=1)
        logging.getLogger("utils.data.loader").warning("data.batch_size=2000 is more than the 629 samples")
        logging.getLogger("utils.data.bad_samples").warning("image 'a.png' of this rank's slice is unusable")
        logging.getLogger("utils.data.loader").error("an error shows on every rank")
    finally:
        setup_logging(None, rank=0)
    err = capsys.readouterr().err
    assert "batch_size" not in err, err
    assert "[rank1] " in err and "a.png" in err and "an error shows" in err


def test_a_checkpoint_path_through_a_failed_run_says_it_failed_and_names_another_run_s_best(tmp_path, capsys):
    """After a diverged run, latest points to it: the README's --mode test line said only "does not exist"."""
    experiment = tmp_path / "digits_small_cnn"
    (experiment / "run_001" / "checkpoints").mkdir(parents=True)
    (experiment / "run_001" / "log.txt").write_text("")
    (experiment / "run_001" / "checkpoints" / "best.pt").write_bytes(b"")
    (experiment / "run_002").mkdir()
    (experiment / "run_002" / "log.txt").write_text("")
    (experiment / "run_002" / "failed.txt").write_text("loss is nan at epoch 0, step 3; no checkpoint of it\n")
    (experiment / "latest").symlink_to("run_002")
    assert main.main(["--mode", "test", "--checkpoint", str(experiment / "latest" / "checkpoints" / "best.pt")]) == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "does not exist: its run run_002 failed (loss is nan at epoch 0, step 3; failed.txt in it)" in line, line
    assert line.endswith(f"a run that did not fail: {experiment.resolve() / 'run_001' / 'checkpoints' / 'best.pt'}")
