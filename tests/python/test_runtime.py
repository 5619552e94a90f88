# test_runtime.py: the engine runs beside Python: the GIL is released in next, Ctrl-C cancels the run with every
# thread joined, breaking out of a loop frees the run, Python map functions and their exceptions, cancel().
import os
import signal
import threading

import numpy as np
import pytest

import sluice


def threads():
    """Threads of this process, once the first run has started the SIGINT watcher (it lives for the process)."""
    list(sluice.Pipeline({"ops": [{"op": "range", "stop": 1}]}))
    return len(os.listdir("/proc/self/task"))


def test_gil_is_released_while_the_engine_works():
    # One element costs 300 ms of CPU in the engine; a Python thread counts while the consumer waits for it.
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 1}, {"op": "map", "fn": "spin", "args": {"us": 300000}}]})
    inside = threading.Event()
    stop = threading.Event()
    counted = [0]

    def count():
        while not stop.is_set():
            if inside.is_set():
                counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    it = iter(p)
    inside.set()
    next(it)
    inside.clear()
    stop.set()
    t.join()
    # Holding the GIL for the whole call would leave the thread at most a switch interval's worth of turns.
    assert counted[0] > 1000


def test_keyboard_interrupt_cancels_the_run_and_joins_its_threads():
    before = threads()
    # An endless run whose consumer waits on worker threads (an element takes 400 ms without CPU).
    p = sluice.Pipeline({"ops": [{"op": "range"}, {"op": "map", "fn": "sleep_io", "args": {"us": 400000},
                                                  "parallelism": 2}, {"op": "prefetch", "buffer": 2}]})
    timer = threading.Timer(0.6, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in p:
            pass
    timer.join()
    assert threads() <= before
    assert len(list(sluice.Pipeline({"ops": [{"op": "range", "stop": 3}]}))) == 3  # later runs are unaffected


def test_early_break_frees_the_run():
    before = threads()
    p = sluice.Pipeline({"ops": [{"op": "range"}, {"op": "map", "fn": "spin", "args": {"us": 10}, "parallelism": 2},
                                 {"op": "batch", "size": 4}, {"op": "prefetch", "buffer": 4}]})
    for i, e in enumerate(p):
        if i == 3:
            break
    del e
    assert threads() <= before
    it = iter(p)
    next(it)
    assert threads() > before
    del it
    assert threads() <= before
    it = iter(p)
    next(it)
    it.close()
    assert threads() <= before
    with pytest.raises(StopIteration):
        next(it)


def test_cancel_from_another_thread():
    # The consumer waits on the prefetch thread; an element takes 1 s: next() returns cancelled, not an element.
    p = sluice.Pipeline({"ops": [{"op": "range"}, {"op": "map", "fn": "sleep_io", "args": {"us": 1000000}},
                                 {"op": "prefetch", "buffer": 1}]})
    it = iter(p)
    threading.Timer(0.2, it.cancel).start()
    with pytest.raises(sluice.Error, match="cancel"):
        next(it)


def test_python_map_function():
    def double(e):
        return {"value": e["value"] * 2, "raw": e["raw"], "tag": b"t", "f": 0.5}

    def with_raw(e):
        return {"value": e["value"], "raw": np.arange(8, dtype=np.float32) + e["value"]}

    sluice.register_fn("test_with_raw", with_raw)
    sluice.register_fn("test_double", double)
    sluice.register_fn("test_odd", lambda e: int(e["value"]) % 2 == 1, filter=True)
    assert "test_double" in sluice.functions()
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 10}, {"op": "filter", "fn": "test_odd"},
                                 {"op": "map", "fn": "test_with_raw", "parallelism": 2},
                                 {"op": "map", "fn": "test_double"}, {"op": "batch", "size": 5}]})
    (e,) = list(p)
    assert list(e["value"]) == [2, 6, 10, 14, 18]
    assert e["raw"].shape == (5, 8) and e["raw"][1, 0] == 3
    assert e["tag"] == [b"t"] * 5 and list(e["f"]) == [0.5] * 5


def test_python_map_function_passes_engine_arrays_through_without_a_copy():
    seen = {}

    def keep(e):
        seen["in"] = e["value"].ctypes.data
        return e

    sluice.register_fn("test_keep", keep)
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 8}, {"op": "batch", "size": 8}, {"op": "map", "fn": "test_keep"}]})
    (e,) = list(p)
    assert e["value"].ctypes.data == seen["in"]


def test_an_exception_in_a_python_function_surfaces_at_its_element():
    def boom(e):
        if int(e["value"]) == 5:
            raise ValueError("no fives")
        return e

    sluice.register_fn("test_boom", boom)
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 10}, {"op": "map", "fn": "test_boom", "parallelism": 2}]})
    got = []
    with pytest.raises(sluice.Error) as ei:
        for e in p:
            got.append(int(e["value"]))
    assert got == [0, 1, 2, 3, 4]
    msg = str(ei.value)
    assert "ops[1]" in msg and "test_boom" in msg and "element 5" in msg
    assert "ValueError: no fives" in msg and "Traceback" in msg and "in boom" in msg
    cause = ei.value.__cause__
    assert isinstance(cause, ValueError) and cause.__traceback__ is not None


def test_a_python_function_returning_a_bad_value_fails_with_its_type():
    sluice.register_fn("test_bad_return", lambda e: 42)
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 3}, {"op": "map", "fn": "test_bad_return"}]})
    with pytest.raises(sluice.Error, match="must return a dict"):
        list(p)
