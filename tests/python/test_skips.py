# test_skips.py: on_error "skip" skips data errors only (a component name no op makes is a spec error, at build
# time or, behind a Python function, at the first element), and skips speak: a SkipWarning per run and op with the
# counts and the first reasons and files, it.skipped and it.stats() for that run alone, PNG and corrupt JPEG apart.
import os
import warnings

import pytest

import sluice

from conftest import image_spec, parse_ops


@pytest.fixture(scope="module")
def folder(data, tmp_path_factory):
    """An image folder: the generated JPEGs as files, two PNGs and a corrupt JPEG."""
    d = tmp_path_factory.mktemp("folder")
    spec = image_spec(data, decode=False, batch=0)
    for i, e in enumerate(sluice.Pipeline(spec)):
        (d / f"a{i:02d}.jpg").write_bytes(e["image/encoded"])
    (d / "b1.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"x" * 50)
    (d / "b2.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"y" * 70)
    (d / "c.jpg").write_bytes(b"\xff\xd8" + b"\x00" * 100)
    return d


def load(e):
    with open(e["filename"], "rb") as f:
        return {**e, "image/encoded": f.read()}


sluice.register_fn("t_load_file", load)


def folder_spec(d, component="image/encoded"):
    return {"ops": [{"op": "files", "glob": str(d / "*")}, {"op": "map", "fn": "t_load_file"},
                    {"op": "map", "fn": "decode_jpeg", "on_error": "skip", "parallelism": 2,
                     "args": {"component": component, "channels": 3}}]}


def test_typo_in_component_is_a_spec_error_under_skip(data):
    spec = image_spec(data, decode=False, batch=0)
    spec["ops"].append({"op": "map", "fn": "decode_jpeg", "on_error": "skip", "args": {"component": "image/encodd"}})
    with pytest.raises(sluice.SpecError, match="image/encodd"):
        sluice.Pipeline(spec)


def test_typo_behind_a_python_function_stops_the_run(folder):
    # the structure after a Python function is not known at build time: the first element names the mistake,
    # and on_error "skip" does not drop it
    p = sluice.Pipeline(folder_spec(folder, "image/encodd"))
    with pytest.raises(sluice.SpecError, match="no component 'image/encodd'"):
        list(p)
    assert p.stats()[2]["errors_skipped"] == 0


def test_skips_warn_once_per_run_with_reasons_and_files(folder):
    p = sluice.Pipeline(folder_spec(folder))
    for run in (1, 2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            it = iter(p)
            n = sum(1 for _ in it)
        skips = [w for w in caught if issubclass(w.category, sluice.SkipWarning)]
        assert n == 12 and len(skips) == 1, [str(w.message) for w in caught]
        text = str(skips[0].message)
        assert f"skipped 3 element(s) in run {run}" in text and "ops[2] (map decode_jpeg)" in text
        assert "2 x " in text and "data is a PNG" in text and ("b1.png" in text or "b2.png" in text)
        assert "1 x " in text and "corrupt JPEG" in text and "c.jpg" in text
        # this run's own: counts per run, not summed over runs
        assert it.skipped["ops[2]"]["count"] == 3 and it.skipped["ops[2]"]["errors"] == 3
        counts = sorted(r["count"] for r in it.skipped["ops[2]"]["reasons"])
        assert counts == [1, 2]
        st = it.stats()[2]
        assert st["skipped"] == 3 and st["elements_out"] == 12
        assert p.stats()[2]["skipped"] == 3 * run
    assert {r["count"] for r in p.skips()["ops[2]"]} == {4, 2}


def test_a_clean_run_warns_nothing(data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        it = iter(sluice.Pipeline(image_spec(data, batch=0)))
        assert sum(1 for _ in it) == 12
    assert not [w for w in caught if issubclass(w.category, sluice.SkipWarning)]
    assert it.skipped == {}


def _png(v):
    """A valid 1x1 gray PNG of value v."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(bytes([0, v]))) + chunk(b"IEND", b""))


def test_each_runs_warning_names_its_own_element_and_the_file_verbatim_at_the_users_loop(tmp_path):
    """Epoch after epoch the corrupt file sits elsewhere: each run's warning gives that run's element index and the
    path as it is (digits in folder names kept: data1/), and points at the loop that iterates (this file)."""
    d = tmp_path / "data1" / "x20"
    d.mkdir(parents=True)
    for i in range(12):
        (d / f"f{i:02d}.png").write_bytes(_png(i) if i != 7 else b"\x89PNG\r\n\x1a\n" + b"x" * 20)
    bad = str(d / "f07.png")

    def spec(decode):
        return {"seed": 5, "ops": [{"op": "files", "glob": str(d / "*"), "shuffle": True}] + ([
            {"op": "map", "fn": "read_file"},
            {"op": "map", "fn": "decode_image", "on_error": "skip"}] if decode else [])}
    orders = sluice.Pipeline(spec(False))  # each run of a pipeline is its next epoch: the same orders as p's
    p = sluice.Pipeline(spec(True))
    seen = set()
    for run in (1, 2, 3):
        order = [e["filename"] for e in orders]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            n = sum(1 for _ in p)
        (w,) = [w for w in caught if issubclass(w.category, sluice.SkipWarning)]
        text = str(w.message)
        assert n == 11 and w.filename == __file__, (w.filename, w.lineno)
        assert f"in run {run}: 1 x ops[2]: element {order.index(bad)} (file '{bad}')" in text, (text, order)
        assert "data1/x20/f07.png" in text and "#" not in text
        assert text.count(bad) == 1  # once: the message names the file already
        seen.add(order.index(bad))
    assert len(seen) > 1  # the order changed between runs: the index is each run's own


def test_a_skipped_tar_shard_names_the_shard_and_the_torch_loop(tmp_path):
    torch = pytest.importorskip("torch")
    import tarfile
    import io
    import sluice.torch
    good, bad = tmp_path / "shard-01.tar", tmp_path / "shard-02.tar"
    with tarfile.open(good, "w") as t:
        for k in range(3):
            ti = tarfile.TarInfo(f"s{k}.cls")
            ti.size = 1
            t.addfile(ti, io.BytesIO(b"1"))
    bad.write_bytes(good.read_bytes()[:700])  # cut inside the second header
    ds = sluice.torch.Dataset({"ops": [{"op": "files", "list": [str(good), str(bad)]},
                                       {"op": "tar", "on_corrupt": "skip"}]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in torch.utils.data.DataLoader(ds, batch_size=None):
            pass
    (w,) = [w for w in caught if issubclass(w.category, sluice.SkipWarning)]
    assert w.filename == __file__, (w.filename, w.lineno)
    assert f"shard '{bad}'" in str(w.message) and "the rest of the shard skipped" in str(w.message)
