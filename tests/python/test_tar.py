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
    got = [{k: bytes(v) for k, v in e.items() if k != "__url__"} for e in
           sluice.Pipeline({"ops": [{"op": "files", "list": [path]}, {"op": "tar"}]})]
    for g in got:
        g["__key__"] = g["__key__"].decode()
    assert got == want
    # (the regex's corners: a basename starting with a dot keys on its dotless directory, "y/")
    assert [w["__key__"] for w in want] == ["x/a1", "x/a2", "y/a1", "y/", "z.v2/b"]
