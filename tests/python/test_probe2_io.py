# test_probe2_io.py: issue 47 row 4 from Python: a FIFO among the inputs is an error naming it, never a next() that
# blocks until Ctrl-C (the spec's `files` refuses it when built; read_file, given its name by the data, when read).
import os

import pytest

import sluice


def test_a_fifo_listed_by_files_is_refused_when_built(tmp_path):
    fifo = tmp_path / "x.tfrecord"
    os.mkfifo(fifo)
    with pytest.raises(sluice.Error, match=r"x\.tfrecord' is a FIFO \(a named pipe\), not a regular file"):
        sluice.Pipeline({"ops": [{"op": "files", "list": [str(fifo)]}, {"op": "tfrecord"}]})


def test_a_fifo_named_by_the_data_raises_from_next(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    names = tmp_path / "names.txt"
    names.write_text(f"{fifo}\n")
    it = iter(sluice.Pipeline({"ops": [{"op": "files", "list": [str(names)]}, {"op": "lines"},
                                       {"op": "map", "fn": "read_file", "args": {"component": "line"}}]}))
    with pytest.raises(sluice.Error, match=r"'[^']*/p' is a FIFO \(a named pipe\), not a regular file"):
        next(it)
