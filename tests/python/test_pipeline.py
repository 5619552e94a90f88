# test_pipeline.py: sluice.Pipeline yields what the C API yields (values, dtypes, shapes) on every source kind,
# as numpy arrays that borrow the engine's buffers; specs as path, JSON text or dict; version; errors.
import gc
import json
import os
import sys

import numpy as np
import pytest

import sluice
from sluice import _sluice
from conftest import image_spec, parse_ops, run_cli, spec_file


def flatten(v):
    if isinstance(v, list):
        return [x for item in v for x in flatten(item)]
    return [v]


def assert_same(py, c):
    """Python elements `py` equal the C API's copies `c` component by component."""
    assert len(py) == len(c)
    for i, (pe, ce) in enumerate(zip(py, c)):
        assert sorted(pe) == sorted(ce), f"element {i}"
        for name, (dtype, shape, payload) in ce.items():
            v = pe[name]
            if dtype == "bytes":
                if shape == ():
                    assert v == payload, f"element {i} {name}"
                else:
                    assert flatten(v) == payload, f"element {i} {name}"
            else:
                assert isinstance(v, np.ndarray)
                assert v.dtype.name == dtype and v.shape == shape, f"element {i} {name}"
                assert v.tobytes() == payload, f"element {i} {name}"


def py_and_c(spec):
    """The elements from Python and, from a second pipeline of the same spec, the C API's (a pipeline's second
    run is its second epoch: reshuffled)."""
    py = list(sluice.Pipeline(spec))
    c = _sluice._c_elements(sluice.Pipeline(spec))
    return py, c


def test_version_is_the_cli_version(cli):
    out = run_cli(cli, "--version").stdout.split()
    assert out == ["sluice", sluice.__version__]


@pytest.mark.parametrize("sub,compression", [("img", "NONE"), ("img_gz", "GZIP"), ("img_zlib", "ZLIB")])
def test_tfrecord_records_equal_the_c_api(data, sub, compression):
    spec = image_spec(data, sub, compression, decode=False, batch=0)
    py, c = py_and_c(spec)
    assert len(py) == 12
    assert_same(py, c)
    assert all(isinstance(e["image/encoded"], bytes) and e["image/class/label"].shape == () for e in py)


def test_image_pipeline_equals_the_c_api_and_the_cli(data, cli, tmp_path):
    spec = image_spec(data)
    py, c = py_and_c(spec)
    assert_same(py, c)
    img = py[0]["image"]
    assert img.dtype == np.float32 and img.shape == (4, 32, 32, 3)
    # The CLI runs the same spec to the same count and bytes.
    out = json.loads(run_cli(cli, "run", spec_file(tmp_path, spec), "--json", "--quiet").stdout)
    assert out["elements"] == len(py)
    assert out["bytes"] == sum(v.nbytes if isinstance(v, np.ndarray) else len(v)
                               for e in py for v in e.values() if not isinstance(v, list))


def test_text_pipeline_equals_the_c_api(data):
    spec = {"name": "text", "seed": 3, "ops": [
        {"op": "files", "glob": str(data / "text" / "train-*.txt"), "shuffle": True},
        {"op": "interleave", "cycle_length": 2, "source": [{"op": "lines", "skip_empty": True}]},
        {"op": "map", "fn": "tokenize", "parallelism": 2,
         "args": {"vocab": str(data / "text" / "vocab.txt"), "bos_id": 2, "eos_id": 3}},
        {"op": "shuffle", "buffer": 32},
        {"op": "padded_batch", "size": 8, "padded_shapes": {"tokens": [-1]}}]}
    py, c = py_and_c(spec)
    assert len(py) == 15
    assert_same(py, c)
    assert py[0]["tokens"].dtype in (np.int32, np.int64) and py[0]["tokens"].ndim == 2


def test_lines_as_byte_strings(data):
    spec = {"ops": [{"op": "files", "glob": str(data / "text" / "train-*.txt")}, {"op": "lines"},
                    {"op": "batch", "size": 5}]}
    py, c = py_and_c(spec)
    assert_same(py, c)
    assert isinstance(py[0]["line"], list) and all(isinstance(s, bytes) for s in py[0]["line"])
    assert len(py[0]["line"]) == 5


def test_csv_pipeline_equals_the_c_api(data):
    spec = {"name": "tab", "seed": 1, "ops": [
        {"op": "files", "glob": str(data / "tab" / "train-*.csv")},
        {"op": "interleave", "cycle_length": 2, "source": [{"op": "lines", "skip_empty": True}]},
        {"op": "map", "fn": "parse_csv", "parallelism": 2,
         "args": {"columns": [{"name": "label", "dtype": "int64"},
                              {"name": "dense", "dtype": "float32", "count": 13, "default": 0},
                              {"name": "cat", "dtype": "bytes", "count": 26, "default": ""}], "on_error": "skip"}},
        {"op": "map", "fn": "hash_bucket", "args": {"component": "cat", "buckets": 1000003}},
        {"op": "batch", "size": 32}]}
    py, c = py_and_c(spec)
    assert sum(len(e["label"]) for e in py) == 150
    assert_same(py, c)


def test_rank0_scalars_and_a_spec_as_json_text():
    py = list(sluice.Pipeline('{"ops": [{"op": "range", "start": 5, "stop": 8}]}'))
    assert [int(e["value"]) for e in py] == [5, 6, 7]
    assert py[0]["value"].shape == () and py[0]["value"].dtype == np.int64


def test_spec_from_a_path(data, tmp_path):
    p = sluice.Pipeline(str(spec_file(tmp_path, {"name": "r", "ops": [{"op": "range", "stop": 3}]})))
    assert p.name == "r" and len(list(p)) == 3
    assert len(list(sluice.Pipeline(spec_file(tmp_path, {"ops": [{"op": "range", "stop": 2}]})))) == 2


def sixteen(e):
    v = int(e["value"])
    return {f"c{i:02d}": np.full((3,), v * 100 + i, dtype=np.float64 if i % 2 else np.int32) for i in range(15)} | {
        "name": b"x%d" % v}


def test_an_element_with_16_components():
    sluice.register_fn("test_sixteen", sixteen)
    spec = {"ops": [{"op": "range", "stop": 10}, {"op": "map", "fn": "test_sixteen"}, {"op": "batch", "size": 4}]}
    py, c = py_and_c(spec)
    assert len(py[0]) == 16
    assert_same(py, c)
    assert py[1]["name"] == [b"x4", b"x5", b"x6", b"x7"]
    assert list(py[0]["c03"][:, 0]) == [3, 103, 203, 303]


# ---------------------------------------------------------------- zero copy


def test_arrays_borrow_the_engine_buffer(data):
    import torch

    e = next(iter(sluice.Pipeline(image_spec(data))))
    img = e["image"]
    assert not img.flags.owndata
    base = img.base
    assert isinstance(base, _sluice.Buf)
    assert base.address <= img.ctypes.data and img.ctypes.data + img.nbytes <= base.address + base.size
    t = torch.from_numpy(img)
    assert t.data_ptr() == img.ctypes.data
    t2 = torch.from_dlpack(img)
    assert t2.data_ptr() == img.ctypes.data
    n2 = np.from_dlpack(img)
    assert n2.ctypes.data == img.ctypes.data


def test_arrays_outlive_the_pipeline(data):
    expected = _sluice._c_elements(sluice.Pipeline(image_spec(data)))
    p = sluice.Pipeline(image_spec(data))
    it = iter(p)
    got = list(it)
    del it, p
    gc.collect()
    assert_same(got, expected)
    img = got[0]["image"]
    # The array holds the only reference to its base; dropping the arrays frees the buffers (no Python leak).
    refs = sys.getrefcount(img.base)  # outside the assert: pytest's rewriting keeps its operands
    assert refs == 2


def test_a_cache_op_makes_read_only_arrays():
    # A cache op's buffers serve every later epoch: writing to them would change the data.
    cached = list(sluice.Pipeline({"ops": [{"op": "range", "stop": 64}, {"op": "batch", "size": 32}, {"op": "cache"}]}))
    assert not cached[0]["value"].flags.writeable
    plain = list(sluice.Pipeline({"ops": [{"op": "range", "stop": 64}, {"op": "batch", "size": 32}]}))
    assert plain[0]["value"].flags.writeable


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_10000_batches_keep_rss_flat():
    import tracemalloc

    spec = {"ops": [{"op": "range", "stop": 10000 * 256}, {"op": "batch", "size": 256}, {"op": "prefetch", "buffer": 4}]}
    p = sluice.Pipeline(spec)
    tracemalloc.start()
    it = iter(p)
    total = 0
    for i, e in enumerate(it):
        total += int(e["value"][0])
        if i == 1000:
            rss0 = rss_bytes()
            traced0 = tracemalloc.get_traced_memory()[0]
    rss1 = rss_bytes()
    traced1 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert i == 9999
    assert rss1 - rss0 < 8 << 20  # 9000 batches of 2 KB would be 18 MB if kept
    assert traced1 - traced0 < 1 << 20


# ---------------------------------------------------------------- errors


def test_bad_spec_raises_spec_error_with_the_library_message(cli, tmp_path):
    spec = {"ops": [{"op": "range", "stop": 4}, {"op": "batch", "size": "big"}]}
    path = spec_file(tmp_path, spec)
    with pytest.raises(sluice.SpecError) as ei:
        sluice.Pipeline(str(path))
    cli_err = run_cli(cli, "validate", path, check=False).stderr.strip()
    assert cli_err == "sluice: " + str(ei.value)
    assert "ops[1].size" in str(ei.value)
    assert ei.value.code == -2
    with pytest.raises(sluice.SpecError, match=r"<spec>:1:\d+: malformed JSON"):
        sluice.Pipeline("{not json")
    with pytest.raises(sluice.SpecError, match="no_such_fn"):
        sluice.Pipeline({"ops": [{"op": "range"}, {"op": "map", "fn": "no_such_fn"}]})
    assert issubclass(sluice.SpecError, sluice.Error)


def test_a_json_string_starting_with_a_bracket_is_json_not_a_path():
    # issue 34 row 18: it was opened as a file, and the message was the string cut off before the reason
    with pytest.raises(sluice.SpecError) as ei:
        sluice.Pipeline("[" * 3000)
    msg = str(ei.value)
    assert msg.startswith("<spec>:") and "cannot open" not in msg and len(msg) < 1100
    with pytest.raises(sluice.SpecError, match="<spec>"):
        sluice.Pipeline('  [{"op": "range"}]')


def test_errors_name_where_as_attributes(tmp_path):
    with pytest.raises(sluice.SpecError) as ei:
        sluice.Pipeline({"ops": [{"op": "range"}, {"op": "map", "fn": "log1p", "args": {"componnet": "value"}}]})
    assert ei.value.path == "ops[1].args.componnet" and ei.value.origin == "<dict>"
    path = spec_file(tmp_path, {"ops": [{"op": "range", "stop": "x"}]})
    with pytest.raises(sluice.SpecError) as ei:
        sluice.Pipeline(str(path))
    assert ei.value.path == "ops[0].stop" and ei.value.origin == str(path)
    with pytest.raises(sluice.SpecError) as ei:
        sluice.Pipeline(str(tmp_path / "missing.json"))
    assert ei.value.path is None
    # a CSV line: the op, the element, the file and its line
    csv = tmp_path / "d.csv"
    csv.write_text("1,2\n3,4\nx,5\n")
    spec = {"ops": [{"op": "files", "list": [str(csv)]}, {"op": "lines"},
                    {"op": "map", "fn": "parse_csv", "args": {"columns": [{"name": "a", "dtype": "int64"},
                                                                         {"name": "b", "dtype": "int64"}]}}]}
    with pytest.raises(sluice.DataError) as ei:
        for _ in sluice.Pipeline(spec):
            pass
    e = ei.value
    assert (e.op, e.element, e.file, e.line, e.record) == ("ops[2]", 2, str(csv), 3, None), str(e)
    # a corrupt TFRecord: the op, the file and the record
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(b"not a tfrecord at all, just bytes")
    with pytest.raises(sluice.DataError) as ei:
        for _ in sluice.Pipeline({"ops": [{"op": "files", "list": [str(bad)]}, {"op": "tfrecord"}]}):
            pass
    e = ei.value
    assert (e.op, e.file, e.record, e.line) == ("ops[1]", str(bad), 0, None), str(e)


def test_bad_data_raises_data_error_with_the_library_message(data, cli, tmp_path):
    raw = bytearray((data / "img" / "train-00000-of-00002.tfrecord").read_bytes())
    raw[5000] ^= 0xFF
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(raw))
    spec = {"ops": [{"op": "files", "list": [str(bad)]}, {"op": "tfrecord"}, parse_ops()]}
    n = 0
    with pytest.raises(sluice.DataError) as ei:
        for _ in sluice.Pipeline(spec):
            n += 1
    msg = str(ei.value)
    assert "bad.tfrecord" in msg and "record 0" in msg
    cli_err = run_cli(cli, "run", spec_file(tmp_path, spec), "--quiet", check=False).stderr.strip().splitlines()[-1]
    assert cli_err == "sluice: " + msg
