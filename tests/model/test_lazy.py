"""Lazy modules are materialized by one dummy forward that leaves BatchNorm statistics and random streams alone."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from utils.errors import ConfigError
from utils.model.lazy import has_lazy_parameters, materialize


def lazy_net() -> nn.Module:
    return nn.Sequential(nn.LazyConv2d(4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.Flatten(), nn.LazyLinear(3))


def test_materialize_creates_the_weights_without_touching_statistics_modes_or_rng():
    torch.manual_seed(0)
    model = lazy_net()
    model[1].eval()  # a mode set by the user stays as it was
    rng = torch.get_rng_state()
    materialize(model, [1, 8, 8], "lazy")
    assert not has_lazy_parameters(model)
    assert model[4].weight.shape == (3, 4 * 6 * 6)
    assert torch.equal(torch.get_rng_state(), rng)  # the streams after it are those of a network without lazy modules
    bn = model[1]
    assert (
        int(bn.num_batches_tracked) == 0
        and torch.equal(bn.running_mean, torch.zeros(4))
        and torch.equal(bn.running_var, torch.ones(4))
    )
    assert model.training and not bn.training and model[2].training


@pytest.mark.parametrize("size", [None, [], [1, 0, 8], [1, 8.5, 8]])
def test_a_lazy_network_without_a_usable_input_size_is_a_config_error(size):
    with pytest.raises(ConfigError, match=r"has lazy modules .*set it, e.g. model.input_size=\[1,8,8\]"):
        materialize(lazy_net(), size, "lazy")


def test_a_network_without_lazy_modules_is_left_alone():
    model = nn.Linear(2, 2)
    materialize(model, None, "plain")  # no input size needed
    assert model.weight.shape == (2, 2)
