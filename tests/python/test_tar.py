# test_tar.py: the `tar` reader against Python's tarfile on shards written with tarfile (plain and gzip): each
# sample's key and components as webdataset's grouping rule makes them from the members tarfile lists, computed here.
import io
import os
import re
import tarfile

import pytest

import sluice


def write_shard(path, members, mode):
    with tarfile.open(path, mode) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))


def webdataset_samples(path):
    """webdataset's tar_file_expander + group_by_keys, written out: regular members, top-level __x__ metadata
    skipped, key/extension by base_plus_ext, extensions lower-cased, consecutive members of a key grouped."""
    out = []
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            if not m.isreg() or re.match(r"__[^/]*__($|/)", m.name):
                continue
            g = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", m.name)
            if not g or g.group(2) == "":
                continue
            key, ext = g.group(1), g.group(2).lower()
            if not out or out[-1]["__key__"] != key:
                out.append({"__key__": key})
            out[-1][ext] = tf.extractfile(m).read()
    return out


@pytest.mark.parametrize("mode,suffix", [("w", ".tar"), ("w:gz", ".tar.gz")])
def test_samples_as_tarfile_lists_them(tmp_path, mode, suffix):
    members = [("__meta__", b"m"), ("x/a1.jpg", b"\xff\xd8one"), ("x/a1.CLS", b"3"), ("x/a1.seg.png", b"png"),
               ("x/noext", b"-"), ("x/a2.jpg", b"two"), ("x/a2.json", b"{}"), ("y/a1.jpg", b"three"),
               ("y/.dot.jpg", b"hidden"), ("q.d/.h.jpg", b"none"), ("z.v2/b.txt", b"dotted dir")]
    path = str(tmp_path / ("s" + suffix))
    write_shard(path, members, mode)
    want = webdataset_samples(path)
    got = [{k: v for k, v in e.items() if k != "__url__"} for e in
           sluice.Pipeline({"ops": [{"op": "files", "list": [path]}, {"op": "tar"}]})]
    # as webdataset's decoder hands them over: the key (and __url__) and text members as str, the rest as bytes
    for w in want:
        for k in ("txt", "text", "transcript"):
            if k in w:
                w[k] = w[k].decode()
    assert got == want and all(type(v) is (str if k in ("__key__", "txt") else bytes) for g in got for k, v in g.items())
    # (the regex's corners: a basename starting with a dot keys on its dotless directory, "y/")
    assert [w["__key__"] for w in want] == ["x/a1", "x/a2", "y/a1", "y/", "z.v2/b"]


def test_names_arrive_as_str_and_data_as_bytes(tmp_path):
    """filename, __key__ and __url__ are str (paths decoded as os.fsdecode does: a name that is not UTF-8 opens the
    same file), batched ones lists of str; data stays bytes; a str a Python function hands back is stored as the
    bytes it came from."""
    import os
    raw = os.path.join(os.fsencode(tmp_path), b"caf\xe9.bin")  # Latin-1: not UTF-8
    with open(raw, "wb") as f:
        f.write(b"\x00\x01")
    (tmp_path / "plain.bin").write_bytes(b"\xff")
    sluice.register_fn("t_pass_names", lambda e: dict(e))
    spec = {"ops": [{"op": "files", "glob": str(tmp_path / "*.bin")}, {"op": "map", "fn": "t_pass_names"},
                    {"op": "map", "fn": "read_file", "args": {"output": "data"}}]}
    got = {e["filename"]: e["data"] for e in sluice.Pipeline(spec)}
    assert all(type(k) is str for k in got) and all(type(v) is bytes for v in got.values())
    assert got[os.fsdecode(raw)] == b"\x00\x01" and os.fsencode(os.fsdecode(raw)) == raw
    (b,) = list(sluice.Pipeline({"ops": spec["ops"] + [{"op": "batch", "size": 2}]}))
    assert sorted(b["filename"]) == sorted(got) and all(type(x) is bytes for x in b["data"])
