# test_formats.py: `sluice gen imagenet --format tfrecord|folder|tar` writes the same (image bytes, label) pairs in each
# layout, read back both by sluice's readers and independently here (tf.Example fields parsed by sluice, the folder
# walked as torchvision's ImageFolder lists it, the shards listed by Python's tarfile); `sluice.convert` and
# `sluice convert --to tar` write shards that read back to the same elements.
import collections
import os
import tarfile

import pytest

import sluice
from conftest import run_cli

N, CLASSES = 40, 4


@pytest.fixture(scope="module")
def layouts(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("layouts")
    for fmt in ("tfrecord", "folder", "tar"):
        out = run_cli(cli, "gen", "imagenet", "--out", d / fmt, "--n", N, "--shards", 3, "--classes", CLASSES,
                      "--seed", 7, "--format", fmt, "--quiet", "--threads", 2).stdout
        assert f"classes: {CLASSES} of {CLASSES} have an image" in out, out
    return d


def pairs(elements, image, label):
    return collections.Counter((bytes(e[image]), int(e[label])) for e in elements)


def read_tfrecord(d):
    return pairs(sluice.Pipeline({"ops": [
        {"op": "files", "glob": f"{d}/*.tfrecord"}, {"op": "tfrecord"},
        {"op": "map", "fn": "parse_example", "args": {"features": {
            "image/encoded": {"dtype": "bytes"}, "image/class/label": {"dtype": "int64"}}}}]}),
        "image/encoded", "image/class/label")


def test_three_layouts_hold_the_same_images_and_labels(layouts):
    tfr = read_tfrecord(layouts / "tfrecord")
    assert sum(tfr.values()) == N and len({lab for _, lab in tfr}) == CLASSES
    folder = pairs(sluice.Pipeline({"ops": [{"op": "image_folder", "root": str(layouts / "folder")}]}),
                   "image/encoded", "label")
    tar = pairs(sluice.Pipeline({"ops": [
        {"op": "files", "glob": f"{layouts}/tar/*.tar"}, {"op": "tar"},
        {"op": "map", "fn": "parse_int", "args": {"component": "cls", "output": "label"}}]}), "jpg", "label")
    assert folder == tfr
    assert tar == tfr


def test_layouts_as_other_readers_list_them(layouts):
    tfr = read_tfrecord(layouts / "tfrecord")
    # ImageFolder: classes are the sorted sub-folders, the label a class's index; files sorted within a class
    root = layouts / "folder"
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    walked = collections.Counter()
    order = []
    for idx, c in enumerate(classes):
        for name in sorted(os.listdir(root / c)):
            walked[((root / c / name).read_bytes(), idx)] += 1
            order.append(int(name.split(".")[0]))
    assert walked == tfr
    assert sorted(order) == list(range(N))
    # tar shards: <index>.jpg then <index>.cls, every member a regular file, the keys 0..N-1 in order
    keys, from_tar = [], collections.Counter()
    for shard in sorted(os.listdir(layouts / "tar")):
        with tarfile.open(layouts / "tar" / shard) as tf:
            ms = tf.getmembers()
            assert all(m.isreg() for m in ms)
            for jpg, cls in zip(ms[::2], ms[1::2]):
                assert jpg.name.endswith(".jpg") and cls.name == jpg.name[:-3] + "cls"
                keys.append(int(jpg.name[:-4]))
                from_tar[(tf.extractfile(jpg).read(), int(tf.extractfile(cls).read()))] += 1
    assert keys == list(range(N))
    assert from_tar == tfr


def test_layout_only_for_imagenet(cli, tmp_path):
    r = run_cli(cli, "gen", "ssd", "--out", tmp_path / "s", "--n", 4, "--format", "tar", check=False)
    assert r.returncode != 0 and "folder and tar are for imagenet" in r.stderr, r.stderr
    r = run_cli(cli, "gen", "imagenet", "--out", tmp_path / "s", "--n", 4, "--format", "zip", check=False)
    assert r.returncode != 0 and "unknown format 'zip'" in r.stderr, r.stderr
