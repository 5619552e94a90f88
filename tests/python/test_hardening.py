# test_hardening.py: what issue 34 found breaking from Python: a spec deeper than the op chain limit and knobs past
# their bounds are errors (not a crash of the interpreter); next() from two threads on one iterator is serialised;
# a forked child touching its parent's live iterator gets an error, not a hang; Ctrl-C inside a synchronous map
# function arrives as KeyboardInterrupt.
import multiprocessing
import os
import signal
import threading
import time

import numpy as np
import pytest

import sluice

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() of a process with threads


def test_a_chain_deeper_than_the_limit_is_a_spec_error():
    ops = [{"op": "range", "stop": 5}] + [{"op": "take", "count": 5}] * 49999
    with pytest.raises(sluice.SpecError, match=r"ops\[1000\]: the op chain is more than 1000 ops deep"):
        sluice.Pipeline({"ops": ops})
    assert len(list(sluice.Pipeline({"ops": ops[:1000]}))) == 5


@pytest.mark.parametrize("op,match", [
    ({"op": "prefetch", "buffer": 2**32}, r"ops\[1\]\.buffer: 4294967296 is out of range \(valid: 1\.\.65536\)"),
    ({"op": "map", "fn": "identity", "parallelism": 2, "buffer": 2**32}, r"ops\[1\]\.buffer: 4294967296 is out"),
    ({"op": "map", "fn": "identity", "parallelism": 2, "buffer": 2**32 + 1}, r"ops\[1\]\.buffer: 4294967297 is out"),
    ({"op": "map", "fn": "identity", "parallelism": 2**20}, r"ops\[1\]\.parallelism: 1048576 is out of range"),
    ({"op": "interleave", "parallelism": 2, "buffer": 2**40, "source": [{"op": "range", "stop": 3}]},
     r"ops\[1\]\.buffer: 1099511627776 is out of range \(valid: 1\.\.1024\)"),
])
def test_knobs_past_their_bounds_are_spec_errors(op, match):
    with pytest.raises(sluice.SpecError, match=match):
        sluice.Pipeline({"ops": [{"op": "range", "stop": 10}, op]})


def test_next_from_two_threads_is_serialised():
    n, size = 4000, 4
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": n}, {"op": "map", "fn": "identity", "parallelism": 2},
                                 {"op": "prefetch", "buffer": 4}, {"op": "batch", "size": size}]})
    for _ in range(20):
        it = iter(p)
        got = [[], []]
        errors = []

        def consume(k):
            try:
                for e in it:
                    got[k].append(e)
            except BaseException as x:  # noqa: BLE001 - reported below
                errors.append(x)

        ts = [threading.Thread(target=consume, args=(k,)) for k in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        values = []
        for e in got[0] + got[1]:
            assert set(e) == {"value"}
            v = e["value"]
            assert v.shape == (size,) and v.dtype == np.int64
            assert list(v) == list(range(v[0], v[0] + size))  # every element whole
            values.extend(v)
        assert sorted(values) == list(range(n))


def _wait_child(pid, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung on the inherited iterator")


def _live_iterator():
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 1000},
                                 {"op": "map", "fn": "identity", "parallelism": 2}, {"op": "prefetch", "buffer": 2}]})
    it = iter(p)
    assert int(next(it)["value"]) == 0  # the run's threads are going
    return p, it


def test_a_forked_child_touching_a_live_iterator_gets_an_error():
    p, it = _live_iterator()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            next(it)
        except sluice.Error as e:
            code = 0 if "cannot be continued in process" in str(e) else 2
        except BaseException:  # noqa: BLE001
            code = 3
        try:  # a new run in the child works
            code = code or (0 if len(list(sluice.Pipeline({"ops": [{"op": "range", "stop": 3}]}))) == 3 else 4)
        except BaseException:  # noqa: BLE001
            code = 5
        os._exit(code)
    assert _wait_child(pid) == 0
    assert int(next(it)["value"]) == 1  # the parent's run goes on
    it.close()


def test_a_forked_child_of_a_tuned_run_ends_without_waiting_for_the_parents_threads():
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 100000},
                                 {"op": "map", "fn": "spin", "args": {"us": 1}, "parallelism": 2}]}, tune=True)
    it = iter(p)
    next(it)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            next(it)
        except sluice.Error:
            code = 0
        del it  # the iterator and the pipeline (with its tuner) freed in the child: nothing to join here
        del p
        os._exit(code)
    assert _wait_child(pid) == 0
    it.close()


def _mp_child(it, q):
    try:
        next(it)
        q.put("no error")
    except sluice.Error as e:
        q.put(str(e))


def test_a_multiprocessing_fork_child_gets_an_error():
    p, it = _live_iterator()
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_mp_child, args=(it, q))
    proc.start()
    proc.join(60)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail("the multiprocessing child hung on the inherited iterator")
    assert proc.exitcode == 0
    assert "cannot be continued in process" in q.get(timeout=10)
    it.close()


@pytest.mark.parametrize("on_error", ["error", "skip"])
def test_ctrl_c_inside_a_synchronous_map_function_is_keyboard_interrupt(on_error):
    def slow(e):
        if int(e["value"]) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # delivered as KeyboardInterrupt inside this function
            time.sleep(5)
        return {"value": e["value"]}

    sluice.register_fn("test_ctrl_c_" + on_error, slow)
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 10},
                                 {"op": "map", "fn": "test_ctrl_c_" + on_error, "on_error": on_error}]})
    seen = []
    with pytest.raises(KeyboardInterrupt) as ki:
        for e in p:
            seen.append(int(e["value"]))
    assert ki.type is KeyboardInterrupt and seen == [0, 1, 2]
    assert len(list(sluice.Pipeline({"ops": [{"op": "range", "stop": 3}]}))) == 3
