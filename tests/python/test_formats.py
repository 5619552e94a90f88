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


def tfrecord_spec(d):
    return {"ops": [{"op": "files", "glob": f"{d}/*.tfrecord"}, {"op": "tfrecord"},
                    {"op": "map", "fn": "parse_example", "args": {"features": {
                        "image/encoded": {"dtype": "bytes"}, "image/class/label": {"dtype": "int64"}}}}]}


def test_convert_round_trip(layouts, tmp_path):
    want = read_tfrecord(layouts / "tfrecord")
    r = sluice.convert(tfrecord_spec(layouts / "tfrecord"), to="tar", out=tmp_path / "tar", shards=2)
    assert r["elements"] == N and r["files"] == 2 and r["bytes"] > 0
    assert sorted(os.listdir(tmp_path / "tar")) == ["train-00000-of-00002.tar", "train-00001-of-00002.tar"]
    back = pairs(sluice.Pipeline({"ops": [
        {"op": "files", "glob": f"{tmp_path}/tar/*.tar"}, {"op": "tar"},
        {"op": "map", "fn": "parse_int", "args": {"component": "cls", "output": "label"}}]}), "jpg", "label")
    assert back == want
    # and back to TFRecord, from a Pipeline object, with another prefix
    p = sluice.Pipeline({"ops": [{"op": "files", "glob": f"{tmp_path}/tar/*.tar"}, {"op": "tar"},
                                 {"op": "map", "fn": "parse_int", "args": {"component": "cls", "output": "label"}},
                                 {"op": "map", "fn": "select", "args": {"keep": ["jpg", "label"]}}]})
    r = sluice.convert(p, to="tfrecord", out=tmp_path / "tfr", shards=3, prefix="val")
    assert r == {"elements": N, "files": 3, "bytes": r["bytes"]}
    assert len([f for f in os.listdir(tmp_path / "tfr") if f.startswith("val-")]) == 3
    assert read_tfrecord(tmp_path / "tfr") == want


def test_convert_runs_python_functions(layouts, tmp_path):
    """The converter runs with the GIL released: a Python map function in the spec runs (no deadlock)."""
    sluice.register_fn("fmt_note", lambda e: {**e, "note": b"k%d" % int(e["image/class/label"])})
    spec = tfrecord_spec(layouts / "tfrecord")
    spec["ops"].append({"op": "map", "fn": "fmt_note"})
    sluice.convert(spec, to="tar", out=tmp_path / "n")
    with tarfile.open(tmp_path / "n" / "train-00000-of-00001.tar") as tf:
        notes = [tf.extractfile(m).read() for m in tf.getmembers() if m.name.endswith(".note")]
    assert len(notes) == N and all(n.startswith(b"k") for n in notes)


def test_convert_errors_leave_nothing(layouts, tmp_path):
    spec = tfrecord_spec(layouts / "tfrecord")
    spec["ops"].append({"op": "map", "fn": "decode_image", "args": {"component": "image/encoded"}})
    for to in ("tfrecord", "tar"):
        with pytest.raises(sluice.DataError, match=r"element 0: component 'image' is uint8"):
            sluice.convert(spec, to=to, out=tmp_path / to, shards=2)
        assert os.listdir(tmp_path / to) == []
    with pytest.raises(ValueError, match="unknown output format 'zip'"):
        sluice.convert(tfrecord_spec(layouts / "tfrecord"), to="zip", out=tmp_path / "z")


def test_convert_ctrl_c_leaves_nothing(layouts, tmp_path):
    import signal
    import threading
    spec = tfrecord_spec(layouts / "tfrecord")
    spec["ops"] += [{"op": "repeat", "count": 100}, {"op": "map", "fn": "sleep_io", "args": {"us": 5000}}]
    t = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sluice.convert(spec, to="tar", out=tmp_path / "c", shards=2)
    finally:
        t.cancel()
    assert os.listdir(tmp_path / "c") == []
