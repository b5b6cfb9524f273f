"""The demo runs as TensorBoard shows them: its own reader finds the pictures and the text; headless
Chromium, where installed, renders them from a TensorBoard server on loopback."""

from __future__ import annotations

import html
import io
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

import main
from tests.conftest import fast_overrides, subprocess_env
from tests.fixtures.dist_utils import free_port

pytest.importorskip("tensorboard")

# frames are drawn under virtual time: TensorBoard's cards fill in when they come into view
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--run-all-compositor-stages-before-draw",
]
TITLES = ("val/confusion_matrix", "test/confusion_matrix", "val/saliency_grid", "test/saliency_grid", "val/top1")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A short digits run and a short sod_shapes run, side by side as ``tensorboard --logdir`` sees them."""
    root = tmp_path_factory.mktemp("tb_runs")
    assert main.main(fast_overrides(root, "digits", epochs=2)) == 0
    sod = [
        "--config",
        "configs/sod_shapes.yaml",
        f"experiment.output_root={root}",
        "experiment.name=sod",
        "data.args.counts={train: 32, val: 6, test: 5}",
        "train.epochs=1",
    ]
    assert main.main(sod) == 0
    return root


def reader(run: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"), size_guidance={"images": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_event_accumulator_reads_the_pictures_the_config_text_and_the_hparams(runs):
    digits, sod = reader(runs / "digits" / "latest"), reader(runs / "sod" / "latest")
    assert {"val/confusion_matrix", "test/confusion_matrix", "val/confident_mistakes"} <= set(digits.Tags()["images"])
    # at the optimizer step that ended each epoch (19 steps of 64 digits): one axis for every event
    assert [(e.step, e.width, e.height) for e in digits.Images("val/confusion_matrix")] == [
        (19, 316, 340),
        (38, 316, 340),
    ]
    assert set(sod.Tags()["images"]) == {"val/saliency_grid", "test/saliency_grid"}
    # 5 test images
    assert [(e.width, e.height) for e in sod.Images("test/saliency_grid")] == [(84 + 5 * 96 + 7 * 4, 3 * 96 + 4 * 4)]
    for acc, name in ((digits, "digits"), (sod, "sod")):
        assert acc.Tags()["tensors"] == ["config/text_summary"]
        text = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
        assert f"    experiment:\n      name: {name}\n" in text  # the resolved config, as a Markdown code block
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = digits.PluginTagToContent("hparams")
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert {m.name.tag for m in experiment.metric_infos} == {"test/top1", "test/top5", "test/loss", "test/samples"}
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert (
        session.hparams["optim.lr"].number_value == pytest.approx(3e-3)
        and session.hparams["model.name"].string_value == "classifier"
    )


def wait_for(url: str, expected: str, seconds: float) -> None:
    """Until ``url`` answers with ``expected`` in its body (the server up and the runs loaded)."""
    deadline = time.monotonic() + seconds
    body = ""
    while expected not in body:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not mention {expected!r} within {seconds} s: {body[:300]!r}")
        try:
            body = urllib.request.urlopen(url, timeout=5).read().decode()
        except OSError:
            pass
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_chromium_renders_the_cards_and_their_images_from_a_tensorboard_server(runs, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(runs), "--host", "127.0.0.1", "--port", str(port)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(f"{base}/data/plugin/images/tags", "sod/tb", 90)  # the server has read both runs
        wait_for(f"{base}/data/plugin/images/tags", "digits/tb", 30)
        url = f"{base}/?darkMode=false&tagFilter=(confusion_matrix|saliency_grid|val/top1)#timeseries"
        for attempt in range(5):  # the frontend loads in stages; a busy machine needs more looks and more time
            page = subprocess.run(
                [
                    "chromium",
                    *CHROMIUM_FLAGS,
                    f"--user-data-dir={tmp_path / f'profile{attempt}'}",
                    "--window-size=1200,2400",
                    f"--virtual-time-budget={30000 * (attempt + 1)}",
                    "--dump-dom",
                    url,
                ],
                capture_output=True,
                text=True,
                timeout=150,
            ).stdout
            if all(title in page for title in TITLES):
                break
        missing = [title for title in TITLES if title not in page]
        assert not missing, f"no card for {missing}"
        sources = sorted(
            {html.unescape(s) for s in re.findall(r'<img[^>]*src="(data/plugin/timeseries/imageData[^"]*)"', page)}
        )
        assert len(sources) == 4  # the latest picture of each tag
        sizes = {
            Image.open(io.BytesIO(urllib.request.urlopen(f"{base}/{src}", timeout=10).read())).size for src in sources
        }
        assert sizes == {(316, 340), (84 + 6 * 96 + 8 * 4, 3 * 96 + 4 * 4), (84 + 5 * 96 + 7 * 4, 3 * 96 + 4 * 4)}
    finally:
        server.terminate()
        server.wait(timeout=30)
