"""sluice.torch.probe: the no-workers probe (the CPU a batch costs without workers, measured in a forked child) and
the hand-off probe (what passing a batch from a worker process costs, for a loader without workers)."""

import json as _json
import os as _os
import select as _select
import signal as _signal
import threading as _threading
import time as _time

import torch as _torch

from .loader import _loader_args, _make_loader, _stop_workers
from .machine import _proc_sched, _thread_sched


PROBE_CPU = 0.2    # seconds of the child's CPU on batches after its warm-up
PROBE_WALL = 0.6   # ... or of its wall clock, whichever comes first (a blocked dataset spends little CPU)
PROBE_TIMEOUT = 2.0  # the child is killed after this many seconds, plus 3x the batches it should take
PROBE_MAX_BATCH = 1.0  # a batch this slow in a worker (seconds) is not probed: two would take too long
PROBE_SEGMENTS = 5  # the budget is spent in this many segments (fewer when a batch takes more than one's share)
PROBE_GAP = 0.1  # seconds between them
HANDOFF_SECONDS = 1.0  # the hand-off probe's run with one worker, after its first batch ...
HANDOFF_BATCHES = 8  # ... or until this many batches, whichever comes later (at most HANDOFF_MAX_SECONDS)
HANDOFF_MAX_SECONDS = 4.0


def _probe_child(loader, cpu, wall):
    """In the forked child: the loader's own num_workers=0 fetch (its sampler, dataset, collate_fn, batching) for
    `cpu` seconds of CPU or `wall` seconds after a warm-up (the first batch, and a tenth of either), in up to
    PROBE_SEGMENTS segments PROBE_GAP apart; the median segment's CPU and blocked time (wall less CPU less run-queue
    delay) per batch of its main thread. A shared machine runs this code up to 1.7x slower for a few hundred ms now
    and then (measured on the development VM, in one process, no fork): spread segments mostly miss such a spell."""
    _torch.set_num_threads(1)  # as a DataLoader worker does (and torch's thread pool is not the parent's after fork)
    # The collector is left as the parent has it (no gc.freeze()): the run without workers would happen in the
    # parent, collections included. Frozen, the child ran transfer's microsecond batches 10-20% faster than the
    # parent's num_workers=0 runs measured (1.12-1.20 predicted/measured in 4 alternating bench runs, 0.87-1.07 not)
    L = _make_loader(_loader_args(loader), num_workers=0, pin_memory=False)  # CUDA is not for a forked child
    tid = _threading.get_native_id()
    its = [iter(L)]

    def fetch(c_budget, w_budget):
        """Batches until `c_budget` CPU or `w_budget` wall (one at least): (batches, CPU, wall, run-queue delay)."""
        it = its[0]
        n, k = 0, 1
        c0, w0, q0 = _time.thread_time(), _time.perf_counter(), _thread_sched(tid)[1]
        while True:
            for _ in range(k):
                try:
                    next(it)
                except StopIteration:  # an epoch ended: the next one, as a training loop would start it
                    it = its[0] = iter(L)
                    next(it)  # an empty epoch ends the probe (StopIteration)
            n += k
            c, w = _time.thread_time() - c0, _time.perf_counter() - w0
            if c >= c_budget or w >= w_budget:
                return n, c, w, _thread_sched(tid)[1] - q0
            # the clocks read about every 2 ms of batches: reading them costs a microsecond batch a few percent
            k = max(1, min(2 * k, int(0.002 * n / c) if c > 0 else 2 * k))

    n, c, w, q = fetch(cpu / 10, wall / 10)  # the iterator's start, cold caches, the fork's pages copied
    per = c / n
    segs = max(1, min(PROBE_SEGMENTS, int(cpu / per) if per > 0 else PROBE_SEGMENTS))  # a batch a segment at least
    got = []
    for i in range(segs):
        if i:
            _time.sleep(PROBE_GAP)
            if per < cpu / segs / 10:  # the caches that other processes took during the gap
                fetch(cpu / segs / 10, wall / segs / 10)
        n, c, w, q = fetch(cpu / segs, wall / segs)
        got.append((c / n, max(w - c - q, 0.0) / n, n, q / n))
    mid = sorted(got, key=lambda g: g[0] + g[1])[len(got) // 2]
    return {"batches": sum(g[2] for g in got), "segments": segs, "cpu": mid[0], "blocked": mid[1], "runq": mid[3]}


def _probe_no_workers(loader, batch_wall, cpu=PROBE_CPU, wall=PROBE_WALL):
    """(figures, None) or (None, why not): the CPU and blocked time per batch of `loader` without workers, from
    `_probe_child` in a forked child process. The workers' figures carry the hand-off (pickling a batch evicts the
    caches the next sample's steps use); the child pickles nothing, and the user's process never runs the dataset
    itself: like a fork-started worker, the child has a copy of the dataset (an IterableDataset's iterator included)
    and whatever it opens ends with it. `batch_wall`: a batch's time in a worker (the timeout's measure)."""
    if batch_wall > PROBE_MAX_BATCH:
        return None, f"a batch takes {batch_wall:.1f} s in a worker: too slow to probe without workers"
    timeout = PROBE_TIMEOUT + 3 * (wall + (PROBE_SEGMENTS - 1) * PROBE_GAP + 2 * batch_wall)
    return _in_child(lambda: _probe_child(loader, cpu, wall), timeout)


def _probe_hand_off(loader, seconds=HANDOFF_SECONDS, least=HANDOFF_BATCHES, most=HANDOFF_MAX_SECONDS):
    """(figures, None) or (None, why not), for a loader without workers: what handing its batches over from a worker
    process costs, which its own run cannot show. The loader with one worker (as num_workers=1 would run it: the
    workers are this process's children, as the check's are) for `seconds` after its first batch, or until `least`
    batches (at most `most` seconds): per batch, the main thread's CPU in next() (taking the batch: unpickling, the
    loader's loop) and the worker process's CPU (the work, and its loop and pickling into shared memory). Without
    them, a num_workers=0 loader's planted 8 ms batches were priced at 1.96x with 2 workers, measured 1.45-1.51x."""
    L = _make_loader(_loader_args(loader), num_workers=1, prefetch_factor=2, persistent_workers=False,
                     pin_memory=False)
    it = None
    try:
        it = iter(L)
        next(it)  # the worker's start-up and first batch
        workers = getattr(it, "_workers", None) or []
        if len(workers) != 1 or not workers[0].pid:
            return None, "its worker process could not be seen"
        pid = workers[0].pid
        w0, m0, t0 = _proc_sched(pid)[0], _time.thread_time(), _time.monotonic()
        n = 0
        while True:
            try:
                next(it)
            except StopIteration:
                break  # an epoch's end: a new one would start a new worker
            n += 1
            t = _time.monotonic() - t0
            if (t >= seconds and n >= least) or t >= most:
                break
        w1, m1 = _proc_sched(pid)[0], _time.thread_time()
    except Exception as e:  # noqa: BLE001 (the user's dataset in a worker: any failure means no figure)
        return None, f"one worker raised {type(e).__name__}: {e}"[:300]
    finally:
        _stop_workers(L, it)
    if n < 3:
        return None, f"one worker made {n} batches after its first"
    return {"main": (m1 - m0) / n, "worker": (w1 - w0) / n, "batches": n}, None


def _in_child(fn, timeout):
    """(what `fn` returned, None) or (None, why not): `fn()` (its result JSON-ready) in a forked child process,
    killed after `timeout` seconds or when this process ends; it runs only the dataset's code, as a fork-started
    worker does, and ends with os._exit. The caller's Ctrl-C kills it too."""
    if not hasattr(_os, "fork"):
        return None, "no fork() on this platform"
    parent = _os.getpid()
    rd, wr = _os.pipe()
    try:
        import warnings
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork() in a threaded process: the child runs only the dataset's code, as a
            # fork-started worker does, and ends with os._exit
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = _os.fork()
    except OSError as e:
        _os.close(rd)
        _os.close(wr)
        return None, f"fork() failed: {e}"
    if pid == 0:  # the child: never returns into the caller's code
        try:
            _os.close(rd)
            _die_with_parent(parent)
            try:
                msg = fn()
            except BaseException as e:  # noqa: B036 (KeyboardInterrupt too: the child only reports)
                msg = {"error": f"{type(e).__name__}: {e}"[:500] if str(e) else type(e).__name__}
            _os.write(wr, (_json.dumps(msg) + "\n").encode())
        finally:
            _os._exit(0)
    _os.close(wr)
    got, late = b"", False
    try:
        end = _time.monotonic() + timeout
        while not got.endswith(b"\n"):
            left = end - _time.monotonic()
            late = left <= 0 or not _select.select([rd], [], [], left)[0]
            chunk = b"" if late else _os.read(rd, 4096)
            if not chunk:
                break  # the timeout, or the child ended without a word
            got += chunk
    finally:
        _os.close(rd)
        if not got.endswith(b"\n") or not _reap(pid, 1.0):
            try:
                _os.kill(pid, _signal.SIGKILL)
                _os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass  # reaped already (a SIGCHLD handler of the caller's that waits for any child)
    if late:
        return None, f"its fetch was stopped at its timeout ({timeout:.1f} s)"
    if not got.endswith(b"\n"):
        return None, "the child ended without a figure"
    msg = _json.loads(got)
    if "error" in msg:
        return None, f"its fetch raised {msg['error']}"
    return msg, None


def _reap(pid, seconds):
    """Whether child `pid` ended (and was waited for) within `seconds`."""
    end = _time.monotonic() + seconds
    while True:
        try:
            if _os.waitpid(pid, _os.WNOHANG)[0]:
                return True
        except ChildProcessError:
            return True  # reaped by someone else
        if _time.monotonic() >= end:
            return False
        _time.sleep(0.005)


def _die_with_parent(parent):
    """The probe's child is killed when the user's process (`parent`) ends: a hanging dataset would outlive it."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(_signal.SIGKILL))  # 1: PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if _os.getppid() != parent:  # the parent ended before the line above
        _os._exit(0)
