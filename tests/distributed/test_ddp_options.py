"""``dist.gradient_as_bucket_view`` (on by default) and ``dist.bucket_cap_mb`` reach DDP (2 gloo processes)."""

from __future__ import annotations

from typing import Dict, List

import pytest
import torch
from torch import nn

from tests.fixtures.dist_utils import spawn

pytestmark = pytest.mark.slow  # spawned gloo processes


def grads_in_buckets(rank: int, world_size: int) -> List[Dict[str, object]]:
    from utils.config.schema import DistConfig
    from utils.distributed.parallel import wrap_model
    from utils.distributed.process_group import DistInfo

    out = []
    for cfg in (DistConfig(), DistConfig(gradient_as_bucket_view=False, bucket_cap_mb=0.5)):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        ddp = wrap_model(model, cfg, DistInfo(rank=rank, world_size=world_size))
        ddp(torch.randn(4, 8) + rank).sum().backward()
        out.append(
            {
                "as_view": ddp.gradient_as_bucket_view,
                "cap_bytes": ddp.bucket_bytes_cap,
                "grads_are_views": [p.grad._base is not None for p in model.parameters()],
                "grads": [p.grad.clone() for p in model.parameters()],
            }
        )
    return out


@pytest.mark.timeout(120)
def test_gradients_are_views_into_the_buckets_by_default_and_the_cap_is_passed(tmp_path):
    ranks = spawn(grads_in_buckets, 2, tmp_path)
    default, plain = ranks[0]
    assert default["as_view"] and all(default["grads_are_views"]) and default["cap_bytes"] == 25 * 1024 * 1024
    assert not plain["as_view"] and not any(plain["grads_are_views"]) and plain["cap_bytes"] == int(0.5 * 1024 * 1024)
    for a, b in zip(default["grads"], plain["grads"]):  # the same averaged gradients either way
        torch.testing.assert_close(a, b)
    for a, b in zip(default["grads"], ranks[1][0]["grads"]):
        assert torch.equal(a, b)
