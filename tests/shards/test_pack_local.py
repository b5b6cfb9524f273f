"""--mode pack into a folder and data.name=shards from it: the same samples, keys, bytes and errors as the original."""

from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest
import torch

import main
from tests.apps.conftest import make_digit_folder
from tests.shards.packs import craft, load_split, pack, set_text
from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.data.datasets.moving_shapes import export_frame_folders
from utils.data.datasets.shapes_sod import main as write_shapes
from utils.data.shards.sizes import parse_size
from utils.errors import ConfigError, DataError


def errors(capsys) -> list:
    """The error lines of stderr (the log's INFO lines go there too)."""
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


def same_items(a, b, count: int) -> None:
    for i in range(count):
        (xa, ta), (xb, tb) = a[i], b[i]
        assert torch.equal(torch.as_tensor(xa), torch.as_tensor(xb))
        if isinstance(ta, dict):
            assert ta["name"] == tb["name"] and torch.equal(ta["mask"], tb["mask"])
            assert np.array_equal(ta.get("original", 0), tb.get("original", 0))
        else:
            assert int(ta) == int(tb)


def test_digits_pack_into_several_shards_reads_back_the_same_items(tmp_path, capsys):
    out = pack(capsys, tmp_path / "p", "data.name=digits", "--shard-size", "100KB")
    assert out.startswith("pack: train 1257 samples in ") and "val 180" in out and "test 360" in out
    index = json.loads((tmp_path / "p" / "train" / "index.json").read_text())
    assert index["version"] == 2 and index["task"] == "classification" and len(index["shards"]) > 5
    for split in ("train", "val", "test"):
        original = build_dataset(DataConfig(name="digits"), split)
        packed = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p")), split)
        assert len(packed) == len(original) and packed.sample_keys() == [str(i) for i in range(len(original))]
        assert [str(c) for c in packed.classes] == [str(c) for c in original.classes]
        same_items(original, packed, len(original) if split == "val" else 50)


def test_image_folder_pack_keeps_each_files_bytes_and_gives_the_same_items(tmp_path, capsys):
    data = make_digit_folder(tmp_path / "data")
    pack(capsys, tmp_path / "p", "data.name=image_folder", f"data.root={data}", "data.args={channels: 1}")
    val = load_split(tmp_path / "p" / "val")
    with tarfile.open(tmp_path / "p" / "val" / val.shards[0].name) as tar:  # a plain tar (WebDataset layout)
        names = {member.offset_data: member.name for member in tar.getmembers()}
        for at in range(len(val)):
            stored = tar.extractfile(names[int(val.spans(at)[0]["offset"])]).read()
            assert stored == (data / "val" / val.key(at)).read_bytes()  # the PNG as it was, not decoded
    for split in ("train", "val", "test"):
        args = {"channels": 1}
        original = build_dataset(DataConfig(name="image_folder", root=str(data), args=args), split)
        packed = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), args=args), split)
        assert packed.sample_keys() == original.sample_keys() and packed.classes == original.classes
        same_items(original, packed, len(original))
    # the folder's training order is class by class; its shards are written in a seeded shuffle (the index
    # keeps the folder's order, checked above), so the first shard holds every class and the others mixed
    train = load_split(tmp_path / "p" / "train")
    first = train.samples["shard"] == 0
    order = np.argsort(train.members["offset"][train.samples["member"][first]])
    written = train.samples["label"][first][order].tolist()
    assert sorted(set(written)) == [0, 1, 2] and written != sorted(written)
    # the training transforms, with the same random draws (crops and flips on uint8, as image_folder)
    crop = [{"name": "RandomResizedCrop", "size": 6}, {"name": "RandomHorizontalFlip"}]
    original = build_dataset(DataConfig(name="image_folder", root=str(data), train_transforms=crop), "train")
    packed = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), train_transforms=crop), "train")
    for i in range(len(original)):
        torch.manual_seed(i)
        x_a = original[i][0]
        torch.manual_seed(i)
        assert torch.equal(x_a, packed[i][0]) and x_a.shape == (3, 6, 6)


def test_sod_pack_gives_the_same_images_masks_and_names(tmp_path, capsys):
    write_shapes(["--out", str(tmp_path / "sod"), "--split", "train", "val", "test", "--count", "4"])
    args = "data.args={size: 24}"
    out = pack(capsys, tmp_path / "p", "data.name=image_mask_folder", f"data.root={tmp_path / 'sod'}", args)
    assert "train 4 samples" in out
    assert json.loads((tmp_path / "p" / "test" / "index.json").read_text())["task"] == "sod"
    for split in ("train", "test"):
        original = build_dataset(
            DataConfig(name="image_mask_folder", root=str(tmp_path / "sod"), args={"size": 24}), split
        )
        packed = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), args={"size": 24}), split)
        assert packed.sample_keys() == original.sample_keys()
        same_items(original, packed, len(original))
    # eval.save_predictions names each saliency map after its stem: a stem that is a path is refused on load
    craft(tmp_path / "p" / "test", lambda a, h: set_text(a, "stems", "stem", 1, "../../evil"))
    with pytest.raises(DataError, match=r"at sample 1 \(stem '../../evil' is not a plain file name\)"):
        build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), args={"size": 24}), "test")


def test_a_corrupt_shard_stops_with_its_name_or_is_skipped(tmp_path, capsys):
    pack(capsys, tmp_path / "p", "data.name=digits", "--shard-size", "200KB")
    shard = tmp_path / "p" / "test" / "shard-000000.tar"
    raw = bytearray(shard.read_bytes())
    raw[600] ^= 0xFF
    shard.write_bytes(bytes(raw))
    stop = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p")), "test")
    index = stop.source.index
    hit = next(  # the sample whose stored bytes hold offset 600
        i
        for i in range(len(index))
        if index.samples["shard"][i] == 0
        and any(o <= 600 < o + n for o, n in index.spans(i)[["offset", "size"]].tolist())
    )
    with pytest.raises(
        DataError, match=f"shard-000000.tar' does not match its checksums in index.json at sample '{hit}'"
    ):
        stop[hit]
    assert torch.equal(
        stop[hit + 1][0], build_dataset(DataConfig(name="digits"), "test")[hit + 1][0]
    )  # its neighbours read
    skip = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), args={"on_bad_sample": "skip"}), "test")
    assert torch.equal(skip[hit][0], skip[hit + 1][0])  # the next usable sample, as image folders skip


def test_index_errors_are_one_line_before_training(tmp_path, capsys):
    run = ["data.name=shards", f"data.root={tmp_path / 'p'}", f"experiment.output_root={tmp_path / 'out'}"]
    assert main.main(run) == 2
    err = errors(capsys)
    assert len(err) == 1 and err[0].startswith("error: '") and "written by --mode pack" in err[0]
    pack(capsys, tmp_path / "p", "data.name=digits")
    index = tmp_path / "p" / "train" / "index.json"
    index.write_text(index.read_text().replace('"version":2', '"version":1'))
    assert main.main(run) == 2
    err = errors(capsys)
    assert (
        len(err) == 1
        and "format version 1 (a JSON entry per sample, before the compact index), this framework reads version 2"
        in err[0]
    )


def test_pack_needs_an_output_and_sizes_read_as_written(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main.main(["--mode", "pack", "data.name=digits"])
    assert exit_.value.code == 2 and "--mode pack needs --output" in capsys.readouterr().err
    output = tmp_path / "p"
    assert main.main(["--mode", "pack", "--output", str(output), "data.name=shapes_sod"]) == 2  # generated, in memory
    assert "write generated SOD or video data as folders first" in errors(capsys)[0] and not output.exists()
    assert (
        parse_size("64MB", "k") == 64 * 10**6 and parse_size("2GiB", "k") == 2 * 2**30 and parse_size(512, "k") == 512
    )
    with pytest.raises(ConfigError, match="data.args.cache_limit"):
        parse_size("lots", "data.args.cache_limit")
    data = make_digit_folder(tmp_path / "digits")  # packing into a folder in use is refused
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    assert main.main(["--mode", "pack", "--output", str(used), "data.name=image_folder", f"data.root={data}"]) == 2
    assert errors(capsys) == [f"error: --output '{used}' is not empty; pack into a new or empty folder (or S3 prefix)"]
    assert [p.name for p in used.iterdir()] == ["notes.txt"]


def test_video_frame_folders_pack_into_the_same_clips(tmp_path, capsys):
    args = {"videos": {"train": 4, "val": 4, "test": 4}, "num_frames": 6, "size": 16}
    export_frame_folders(str(tmp_path / "v"), splits=("train", "val", "test"), **args)
    clip = "data.args={clip_len: 4, num_clips: 2}"
    out = pack(capsys, tmp_path / "p", "data.name=video_frames_folder", f"data.root={tmp_path / 'v'}", clip)
    assert "test 4 samples" in out
    for split in ("train", "test"):
        cfg = {"clip_len": 4, "num_clips": 2}
        original = build_dataset(DataConfig(name="video_frames_folder", root=str(tmp_path / "v"), args=cfg), split)
        packed = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), args=cfg), split)
        assert packed.sample_keys() == original.sample_keys() and packed.classes == original.classes
        assert len(packed) == len(original)
        for i in range(len(original)):
            torch.manual_seed(i)  # the training clip's random start
            x_a, y_a = original[i]
            torch.manual_seed(i)
            x_b, y_b = packed[i]
            assert torch.equal(x_a, x_b) and y_a == y_b


def test_any_number_of_workers_packs_the_same_bytes(tmp_path, capsys):
    """--workers K writes the same shards, index and checksums for every K (the plan fixes each shard); a pack read
    as its dataset (data.name=shards) packs again to the same bytes."""
    data = make_digit_folder(tmp_path / "digits")
    for workers in (1, 3):
        args = ["data.name=image_folder", f"data.root={data}", "--shard-size", "3KB", "--workers", str(workers)]
        pack(capsys, tmp_path / f"p{workers}", *args)
    pack(capsys, tmp_path / "again", "data.name=shards", f"data.root={tmp_path / 'p1'}", "--shard-size", "3KB")
    one, three, again = (
        {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()}
        for d in (tmp_path / "p1", tmp_path / "p3", tmp_path / "again")
    )
    assert one == three and sum(1 for p in one if p.suffix == ".tar") > 6
    assert again == one  # a pack packed again: its members as stored, the same plan, the same bytes


def test_a_wrong_data_root_or_a_missing_shard_is_one_line_naming_the_fix_before_any_read(tmp_path, capsys):
    pack(capsys, tmp_path / "p", "data.name=digits", "--shard-size", "100KB")
    packed = tmp_path / "p"
    cases = [
        (packed / "train" / "index.json", "train", "is a file; give the folder --mode pack wrote"),
        (packed / "train", "train", f"is the folder of one packed split; data.root is the folder above it: {packed}"),
        (packed, "nosuch", "holds the packed splits ['test', 'train', 'val'], not 'nosuch'; check data.test_split"),
    ]
    (packed / "train" / "shard-000003.tar").unlink()
    cases.append((packed, "train", "shard-000003.tar' is missing (1 of the 13 shards of its index)"))
    for root, split, named in cases:
        with pytest.raises(DataError) as err:
            build_dataset(DataConfig(name="shards", root=str(root)), split)
        assert named in str(err.value), str(err.value)


def test_another_tasks_arguments_are_named_as_doing_nothing_once(tmp_path, capsys, caplog):
    pack(capsys, tmp_path / "p", "data.name=digits")
    args = {"size": 64, "clip_len": 4, "channels": 1, "num_clips": 3}  # num_clips at its default: nothing to say
    for split in ("train", "val"):
        build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), args=args), split)
    said = [r.getMessage() for r in caplog.records if "does nothing" in r.getMessage()]
    assert said == [  # once for the data, not for each split
        f"data.args.size=64 does nothing: the shards in '{tmp_path / 'p'}' hold classification data",
        f"data.args.clip_len=4 does nothing: the shards in '{tmp_path / 'p'}' hold classification data",
    ]


def test_the_datasets_users_name_read_their_packs(tmp_path, capsys, caplog):
    """image_folder and image_mask_folder take data.root of a pack as they take a folder (shards picks them by the
    pack's task); a pack of another task, or a pack argument given a folder of files, is named."""
    data = make_digit_folder(tmp_path / "digits")
    pack(capsys, tmp_path / "p", "data.name=image_folder", f"data.root={data}")
    args = {"channels": 1}
    for split in ("train", "val"):
        files = build_dataset(DataConfig(name="image_folder", root=str(data), args=args), split)
        packed = build_dataset(DataConfig(name="image_folder", root=str(tmp_path / "p"), args=args), split)
        alias = build_dataset(DataConfig(name="shards", root=str(tmp_path / "p"), args=args), split)
        assert type(alias) is type(packed) and packed.classes == files.classes == alias.classes
        assert packed.sample_keys() == files.sample_keys() == alias.sample_keys()
        same_items(files, packed, len(files))
    build_dataset(DataConfig(name="image_folder", root=str(data), args={"cache_limit": "1GB"}), "train")
    assert (
        f"data.args.cache_limit='1GB' does nothing: data.root '{data}' is a folder of files, not a pack" in caplog.text
    )
    write_shapes(["--out", str(tmp_path / "sod"), "--split", "train", "val", "test", "--count", "2"])
    pack(capsys, tmp_path / "s", "data.name=image_mask_folder", f"data.root={tmp_path / 'sod'}")
    sod = build_dataset(
        DataConfig(name="image_mask_folder", root=str(tmp_path / "s"), args={"image_dir": "Images"}), "test"
    )
    assert (
        len(sod) == 2
        and f"data.args.image_dir='Images' does nothing: data.root is a pack, '{tmp_path / 's'}/test'" in caplog.text
    )
    with pytest.raises(
        DataError, match="holds packed sod data, which dataset 'image_folder' does not read; set data.name=shards"
    ):
        build_dataset(DataConfig(name="image_folder", root=str(tmp_path / "s")), "test")
