# test_online_tuner.py: Pipeline(spec, tune=True): the online tuner runs from the first run until the pipeline is
# rebuilt or freed (one tuner from epoch to epoch), its changes come back as dicts that agree with the knobs in
# force, with their reasons also in plain words, and it stops with the pipeline (threads joined; Ctrl-C still
# cancels a run). Asserts what the tuner guarantees (a solve per window once it has one, a chain of
# changes), never a speed; loops wait for the tuner's windows with a generous safety deadline only.
import json
import os
import signal
import threading
import time

import pytest

import sluice

SPIN = {"name": "spin3", "ops": [{"op": "range"},
                                 {"op": "map", "fn": "spin", "args": {"us": 10}, "parallelism": "autotune"},
                                 {"op": "map", "fn": "spin", "args": {"us": 200}, "parallelism": "autotune"},
                                 {"op": "prefetch", "buffer": "autotune"}]}
KEYS = {"t", "op", "kind", "fn", "knob", "from", "to", "reason", "why", "run"}


def threads():
    """Threads of this process, once the first run has started the SIGINT watcher (it lives for the process)."""
    list(sluice.Pipeline({"ops": [{"op": "range", "stop": 1}]}))
    return len(os.listdir("/proc/self/task"))


def iterate_until(it, done, deadline=120):
    """Pulls elements until done() or the deadline (a loaded machine runs slowly, not wrongly)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for _ in range(64):
            next(it)
        if done():
            return True
    return False


def knobs(p):
    return {s["path"]: {"parallelism": s["parallelism"], "buffer": s["buffer"]} for s in p.stats()}


def test_tuner_solves_while_iterating_and_its_changes_chain_to_the_knobs_in_force():
    p = sluice.Pipeline(SPIN, tune={"interval": 0.3})
    start = knobs(p)
    assert p.tuner_solves() == 0 and p.tuner_changes() == []
    it = iter(p)
    # The first window with enough elements is always solved: the solve count is what the tuner guarantees.
    assert iterate_until(it, lambda: p.tuner_solves() >= 1)
    during = p.tuner_changes()  # readable while the tuner runs
    del it
    changes = p.tuner_changes()
    assert changes[:len(during)] == during
    assert isinstance(changes, list)
    last = {}
    for c in changes:
        assert set(c) == KEYS, c
        assert c["knob"] in ("parallelism", "buffer") and c["kind"] in ("map", "prefetch"), c
        assert c["from"] != c["to"] and (c["to"] >= 1 or c["reason"].startswith("trial")), c
        # a solve's change says what it predicts; the sequential trial's what it measured
        assert ("predicted" in c["reason"] or c["reason"].startswith("trial")) and c["run"] == 0, c
        # Each change starts from the knob the previous one (or the spec) left.
        assert c["from"] == last.get((c["op"], c["knob"]), start[c["op"]][c["knob"]]), (c, changes)
        last[(c["op"], c["knob"])] = c["to"]
    # The knobs in force are those its last changes set.
    now = knobs(p)
    for (op, knob), to in last.items():
        assert now[op][knob] == to, (op, knob, now, changes)
    for c in changes:
        assert c["why"] and "solve" not in c["why"].split(";")[0], c  # the plain words lead


def test_one_tuner_keeps_tuning_from_run_to_run():
    # one tuner per pipeline: it goes on from epoch to epoch (what it learned stays), and stops when the pipeline
    # is rebuilt by optimize(), after which the next run starts a new one
    p = sluice.Pipeline(SPIN, tune={"interval": 0.3})
    for run in range(2):
        before = p.tuner_solves()
        it = iter(p)
        assert iterate_until(it, lambda: p.tuner_solves() > before)
        it.close()
        assert len(p._tuner_logs()) == 1  # still the first tuner
    assert all(c["run"] == 0 for c in p.tuner_changes())
    assert p.tuner_solves() >= 2
    p.optimize(seconds=0.3)
    it = iter(p)
    next(it)
    it.close()
    assert len(p._tuner_logs()) == 2


def test_first_solve_comes_on_counts_not_after_an_interval():
    # The first solve comes as soon as the window's counts carry it (8 root elements, 16 timed elements of each op
    # that did a share of the work), not after an interval: with a 600 s interval, 256 elements of a 200 us map
    # (a run of well under 1 s of work) are enough. The consumer then stops pulling; the deadline only guards.
    p = sluice.Pipeline({"ops": [{"op": "range"},
                                 {"op": "map", "fn": "spin", "args": {"us": 200}, "parallelism": "autotune"},
                                 {"op": "prefetch", "buffer": "autotune"}]}, tune={"interval": 600})
    it = iter(p)
    for _ in range(256):
        next(it)
    end = time.monotonic() + 60
    while p.tuner_solves() == 0 and time.monotonic() < end:
        time.sleep(0.05)
    assert p.tuner_solves() == 1
    it.close()


def test_untuned_pipeline_has_no_tuner():
    p = sluice.Pipeline(SPIN)
    it = iter(p)
    for _ in range(200):
        next(it)
    assert p.tuner_solves() == 0 and p.tuner_changes() == []


def test_bad_tune_arguments_are_refused():
    with pytest.raises(ValueError, match="interval, drift"):
        sluice.Pipeline(SPIN, tune={"intervals": 1})
    with pytest.raises(TypeError, match="bool or a dict"):
        sluice.Pipeline(SPIN, tune="yes")
    with pytest.raises(ValueError, match="negative"):
        sluice.Pipeline(SPIN, tune={"interval": -1})


def test_the_tuner_lives_with_the_pipeline():
    before = threads()
    p = sluice.Pipeline(SPIN, tune={"interval": 0.3})
    for i, e in enumerate(p):
        if i == 100:
            break
    del e
    assert threads() == before + 1  # the run's threads joined; the tuner waits for the next run
    it = iter(p)
    next(it)
    assert threads() > before + 1
    it.close()
    assert threads() == before + 1
    del it, p
    assert threads() <= before  # freeing the pipeline joins its tuner


def test_keyboard_interrupt_cancels_a_tuned_run_and_joins_the_tuner():
    before = threads()
    p = sluice.Pipeline({"ops": [{"op": "range"}, {"op": "map", "fn": "sleep_io", "args": {"us": 400000},
                                                  "parallelism": "autotune"},
                                 {"op": "prefetch", "buffer": "autotune"}]}, tune={"interval": 0.2})
    timer = threading.Timer(0.6, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in p:
            pass
    timer.join()
    del p  # the tuner lives with the pipeline
    assert threads() <= before


def test_tune_fuses_window_crops_first(data):
    """tune=True builds the pipeline with decode_jpeg + random_resized_crop fused (a live pipeline takes no new op),
    as `sluice run --tuner sluice` does; the batches keep their shapes and dtype; without tune nothing is fused."""
    from conftest import image_spec
    spec = image_spec(data)
    assert sluice.Pipeline(spec).tuner_fused() is None
    p = sluice.Pipeline(spec, tune=True)
    note = p.tuner_fused()
    assert "decode_jpeg + ops[5] random_resized_crop" in note and "normalize folded" in note
    assert "decode_and_crop_jpeg" in json.dumps(p.spec())
    plain = next(iter(sluice.Pipeline(spec)))
    fused = next(iter(p))
    assert fused["image"].shape == plain["image"].shape == (4, 32, 32, 3)
    assert fused["image"].dtype == plain["image"].dtype
    spin = sluice.Pipeline(SPIN, tune=True)
    assert spin.tuner_fused() is None
