# conftest.py: fixtures of the Python package's tests: the CLI (to compare with), small generated datasets.
import glob
import gzip
import json
import multiprocessing
import os
import signal
import subprocess
import tempfile
import threading
import time
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session", autouse=True)
def sigint_raises():
    """A suite started in the background by a non-interactive shell (`make test &`) inherits SIGINT ignored, and
    Python then installs no handler: the tests that send themselves SIGINT would wait forever for the
    KeyboardInterrupt. Python's own handler is put in for the session."""
    was = signal.getsignal(signal.SIGINT)
    if was == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if was == signal.SIG_IGN:
        signal.signal(signal.SIGINT, was)


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("SLUICE_CLI") or os.path.join(ROOT, "build", "sluice")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no sluice CLI at {path} (set SLUICE_CLI)")
    return path


def run_cli(cli, *args, check=True):
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True, check=check)


@pytest.fixture(scope="session")
def data(cli, tmp_path_factory):
    """Small datasets made by `sluice gen`, plus GZIP and ZLIB copies of the TFRecord shards."""
    d = tmp_path_factory.mktemp("data")
    run_cli(cli, "gen", "imagenet", "--out", d / "img", "--n", 12, "--shards", 2, "--quiet")
    run_cli(cli, "gen", "text", "--out", d / "text", "--n", 120, "--shards", 2, "--vocab-size", 200, "--quiet")
    run_cli(cli, "gen", "tabular", "--out", d / "tab", "--n", 150, "--shards", 2, "--quiet")
    for name in sorted(os.listdir(d / "img")):
        raw = (d / "img" / name).read_bytes()
        os.makedirs(d / "img_gz", exist_ok=True)
        os.makedirs(d / "img_zlib", exist_ok=True)
        (d / "img_gz" / name).write_bytes(gzip.compress(raw))
        (d / "img_zlib" / name).write_bytes(zlib.compress(raw))
    return d


def spec_file(tmp_path, spec, name="spec.json"):
    p = tmp_path / name
    p.write_text(json.dumps(spec))
    return p


def parse_ops(label=True):
    feats = {"image/encoded": {"dtype": "bytes"}}
    if label:
        feats["image/class/label"] = {"dtype": "int64"}
    return {"op": "map", "fn": "parse_example", "args": {"features": feats}}


def image_spec(d, sub="img", compression="NONE", decode=True, batch=4):
    ops = [{"op": "files", "glob": str(d / sub / "train-*.tfrecord"), "shuffle": True},
           {"op": "interleave", "cycle_length": 2, "parallelism": 2,
            "source": [{"op": "tfrecord", "compression": compression}]},
           {"op": "shuffle", "buffer": 8},
           parse_ops()]
    if decode:
        ops += [{"op": "map", "fn": "decode_jpeg", "parallelism": 2, "args": {"component": "image/encoded",
                                                                                "channels": 3}},
                {"op": "map", "fn": "random_resized_crop", "parallelism": 2, "args": {"size": [32, 32]}},
                {"op": "map", "fn": "random_flip", "args": {}},
                {"op": "map", "fn": "normalize", "args": {}}]
    if batch:
        ops += [{"op": "batch", "size": batch}]
    ops += [{"op": "prefetch", "buffer": 2}]
    return {"name": "img-test", "seed": 7, "ops": ops}


# The torch diagnosis's tests (test_torch_diagnose.py, test_torch_v2.py)

def leftovers():
    """Worker processes, threads and trace directories that diagnose could leave behind."""
    return (multiprocessing.active_children(), sorted(t.name for t in threading.enumerate()),
            glob.glob(os.path.join(tempfile.gettempdir(), "sluice-torch-*")))


@pytest.fixture()
def nothing_left(tmp_path_factory):
    # diagnose's trace directories go to a temporary directory of this test's own (another process may diagnose)
    was = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tmp"))
    before = leftovers()
    try:
        yield
        # torch's own loaders (the test's plain runs) close their queues without joining the feeder threads, which end
        # by themselves, later on a busy machine: they get a few seconds; anything still running then fails the test
        for _ in range(100):
            children, threads, dirs = leftovers()
            if children == [] and threads == before[1] and dirs == before[2] == []:
                break
            time.sleep(0.1)
        assert children == [] and threads == before[1] and dirs == before[2] == []
    finally:
        tempfile.tempdir = was


@pytest.fixture()
def folder(tmp_path):
    """An image folder of 2 classes x 6 JPEGs of 50x40."""
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(1)
    for c in ("a", "b"):
        os.makedirs(tmp_path / c)
        for i in range(6):
            Image.fromarray(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8)).save(tmp_path / c / f"{i}.jpg")
    return tmp_path
