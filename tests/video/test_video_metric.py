"""The ``video`` metric: clip and video top-k, exact over any number of ranks."""

import json
import subprocess
import sys

import pytest
import torch

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.video_eval_worker import SPLITS, evaluate_splits
from utils.errors import ConfigError
from utils.registry import METRICS


def reference(scores: torch.Tensor, labels: torch.Tensor, videos: torch.Tensor) -> dict:
    """Per-clip and per-video top-1 computed directly from all clip scores."""
    probs = scores.double().softmax(dim=1)
    video_ids = videos.unique()
    mean = torch.stack([probs[videos == v].mean(dim=0) for v in video_ids])
    video_labels = torch.stack([labels[videos == v][0] for v in video_ids])
    return {
        "clip_top1": (probs.argmax(1) == labels).double().mean().item(),
        "video_top1": (mean.argmax(1) == video_labels).double().mean().item(),
        "videos": float(len(video_ids)),
    }


def test_video_scores_are_averaged_per_video_in_any_clip_order():
    gen = torch.Generator().manual_seed(0)
    num_videos, clips, classes = 9, 4, 7
    videos = torch.arange(num_videos).repeat_interleave(clips)
    video_labels = torch.randint(classes, (num_videos,), generator=gen)
    labels = video_labels[videos]
    # noisy clip scores around the right class: videos are right more often than clips
    scores = 2.5 * torch.randn(len(videos), classes, generator=gen)
    scores[torch.arange(len(videos)), labels] += 2.0
    expected = reference(scores, labels, videos)
    assert expected["video_top1"] != expected["clip_top1"]

    metric = METRICS.build("video")
    order = torch.randperm(len(videos), generator=gen)  # clips of a video arrive in different batches
    for batch in order.split(5):
        metric.update(scores[batch], {"label": labels[batch], "video": videos[batch]})
    result = metric.result()
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, abs=1e-12), key
    top5 = (scores.topk(5, dim=1).indices == labels[:, None]).any(dim=1).double().mean().item()
    assert result["clip_top5"] == pytest.approx(top5, abs=1e-12)

    metric.reset()  # reset forgets the sizes too: a smaller split afterwards is fine
    metric.update(scores[:3], {"label": labels[:3], "video": videos[:3]})
    assert metric.result()["videos"] == 1.0


def test_targets_without_video_index_are_a_clear_error():
    with pytest.raises(ConfigError, match="needs targets .*video"):
        METRICS.build("video").update(torch.randn(2, 3), torch.tensor([0, 1]))


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("world_size", [2, 3])
def test_multi_process_evaluation_equals_single_process(tmp_path, world_size):
    single = evaluate_splits(0, 1)
    assert single["uneven"]["videos"] == 5.0 and single["fewer_clips_than_ranks"]["videos"] == 2.0
    out = tmp_path / "metrics.json"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={world_size}",
        str(ROOT / "tests" / "fixtures" / "video_eval_worker.py"),
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    multi = json.loads(out.read_text())
    assert set(multi) == set(SPLITS)
    for split, values in single.items():
        assert set(multi[split]) == set(values)
        for key, value in values.items():
            tol = 1e-6 if key == "loss" else 1e-12  # accuracies are ratios of exact counts
            assert multi[split][key] == pytest.approx(value, abs=tol), (split, key)
