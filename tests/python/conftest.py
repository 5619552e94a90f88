# conftest.py: fixtures of the Python package's tests: the CLI (to compare with), small generated datasets.
import gzip
import json
import os
import signal
import subprocess
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
