"""Remote data from Python: a spec's http:// URLs and brace ranges go through the C engine (docs/remote.md). A
loopback http.server (no Range support: the engine takes its whole answers) serves tar shards written here."""
import functools
import http.server
import io
import tarfile
import threading

import pytest

import sluice


@pytest.fixture
def served(tmp_path):
    for s in range(3):
        with tarfile.open(tmp_path / ("shard-%02d.tar" % s), "w") as tf:
            for k in range(4):
                for ext, data in (("txt", b"sample %d of shard %d" % (k, s)), ("cls", b"%d" % (s * 4 + k))):
                    info = tarfile.TarInfo("%02d%02d.%s" % (s, k, ext))
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_tar_shards_over_http(served):
    spec = {"name": "remote", "ops": [{"op": "files", "glob": served + "/shard-{00..02}.tar"}, {"op": "tar"}]}
    got = [(e["__key__"], e["txt"], int(bytes(e["cls"]))) for e in sluice.Pipeline(spec)]  # names and text: str
    assert [c for _, _, c in got] == list(range(12))
    assert got[5] == ("0101", "sample 1 of shard 1", 5)


def test_missing_object_names_the_url(served):
    spec = {"name": "remote", "ops": [{"op": "files", "list": [served + "/nothere.tar"]}, {"op": "tar"}]}
    with pytest.raises(sluice.Error, match="nothere.tar: HTTP 404"):
        list(sluice.Pipeline(spec))
