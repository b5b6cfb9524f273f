"""The one tree walker: every container kind keeps its type, and every user of it agrees."""

from __future__ import annotations

from collections import OrderedDict, defaultdict, namedtuple
from dataclasses import dataclass

import torch

import main
from tests.conftest import fast_overrides
from utils.amp.casting import cast_floats
from utils.checkpoint.background import cpu_copy
from utils.checkpoint.files import stable_addresses
from utils.data.batch import batch_size_of, to_device
from utils.data.prefetch import Normalize
from utils.model.memory_format import inputs_channels_last
from utils.tree import map_tensors, tensors_in

Pair = namedtuple("Pair", "image label")


@dataclass
class Sample:
    image: torch.Tensor
    name: str = "x"


def nested() -> dict:
    d = defaultdict(list)
    d["extra"] = [torch.full((2,), 3.0)]
    return OrderedDict(
        pair=Pair(torch.ones(2, 1, 2, 2), torch.arange(2)), sample=Sample(torch.zeros(2, 3)), more=d, n=5
    )


def test_map_tensors_keeps_every_container_type_and_leaf():
    tree = nested()
    out = map_tensors(lambda t: t + 1, tree)
    assert type(out) is OrderedDict and list(out) == ["pair", "sample", "more", "n"]
    assert type(out["pair"]) is Pair and torch.equal(out["pair"].label, torch.arange(1, 3))
    assert (
        type(out["sample"]) is Sample
        and out["sample"].name == "x"
        and torch.equal(out["sample"].image, torch.ones(2, 3))
    )
    assert (
        type(out["more"]) is defaultdict
        and out["more"].default_factory is list
        and torch.equal(out["more"]["extra"][0], torch.full((2,), 4.0))
    )
    assert out["n"] == 5
    assert len(list(tensors_in(tree))) == 4


def test_every_user_of_the_walker_handles_namedtuples_and_dataclasses():
    tree = nested()
    moved = to_device(tree, torch.device("cpu"))
    assert type(moved["pair"]) is Pair
    assert batch_size_of(tree["pair"]) == 2
    half = cast_floats(tree, torch.bfloat16)
    assert (
        half["pair"].image.dtype == torch.bfloat16
        and half["pair"].label.dtype == torch.int64
        and half["sample"].image.dtype == torch.bfloat16
    )
    copied = cpu_copy(tree)
    assert type(copied["pair"]) is Pair
    assert copied["pair"].image.data_ptr() != tree["pair"].image.data_ptr()  # a namedtuple's tensors are copied too
    assert copied["sample"].image.data_ptr() != tree["sample"].image.data_ptr()
    again = cpu_copy(tree, reuse=copied)
    assert again["pair"].image.data_ptr() == copied["pair"].image.data_ptr()  # the previous copy's memory is reused
    assert stable_addresses(tree) == {t.untyped_storage().data_ptr() for t in tensors_in(tree)}


def test_inputs_transforms_reach_tensors_inside_namedtuple_inputs_and_leave_targets():
    views = Pair(torch.rand(2, 3, 4, 4), torch.rand(2, 3, 4, 4))
    targets = torch.rand(2, 3, 4, 4)
    normalized = Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])((views, targets))
    assert type(normalized[0]) is Pair
    assert torch.allclose(normalized[0].label, (views.label - 0.5) / 0.25)
    assert normalized[1] is targets
    nhwc = inputs_channels_last((views, targets))
    assert nhwc[0].image.is_contiguous(memory_format=torch.channels_last) and nhwc[1].is_contiguous()


def test_a_dataset_with_namedtuple_inputs_trains_and_tests(out_root, capsys):
    args = [
        *fast_overrides(out_root, "views", epochs=1),
        "custom_imports=[tests.fixtures.namedtuple_digits]",
        "data.name=two_view_digits",
        "model.name=two_view_net",
        "model.args={num_classes: 10, width: 8}",
        "model.input_size=null",
        "amp.opt_level=O2",
        "model.channels_last=true",
    ]
    assert main.main(args) == 0
    assert "test: top1=" in capsys.readouterr().out
