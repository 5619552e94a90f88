"""sluice.torch.tracer: one traced run of a loader (the copy with timed steps, the main process's counters,
the window)."""

import glob as _glob
import json as _json
import os as _os
import shutil as _shutil
import tempfile as _tempfile
import threading as _threading
import time as _time

import torch as _torch
from torch.utils.data import DataLoader as _DataLoader
from torch.utils.data import IterableDataset as _IterableDataset

from .common import DiagnoseError
from .loader import _loader_args, _make_loader
from .machine import _busy_cpu_seconds, _proc_io, _proc_sched, _thread_sched
from .record import _REC, _TimedCollate, _TracedIterable, _TracedMap, _timed_dataset_copy


class _Stop(BaseException):
    """Ends the traced script's loop (python -m sluice.torch diagnose) once the window is over."""


class _Tracer:
    """One traced run of a loader: the copy with timed steps, the main process's counters, the window."""

    def __init__(self, loader):
        if not isinstance(loader, _DataLoader):
            raise TypeError(f"sluice.torch.diagnose: expected a torch.utils.data.DataLoader, not "
                            f"{type(loader).__name__}")
        self.loader = loader
        self.dir = _tempfile.mkdtemp(prefix="sluice-torch-")
        self.steps = []
        inner = _timed_dataset_copy(loader.dataset, self.dir, self.steps)
        wrap = _TracedIterable if isinstance(loader.dataset, _IterableDataset) else _TracedMap
        kw = _loader_args(loader)
        kw["dataset"] = wrap(inner, self.dir)
        kw["collate_fn"] = _TimedCollate(loader.collate_fn, self.dir)
        self.traced = _make_loader(kw)
        self.it = None
        self.batches = 0        # batches taken in the window
        self.wait = [0.0, 0.0]  # main thread in next(): wall, CPU (window)
        self.step = [0.0, 0.0]  # between next() calls: the user's step, wall, CPU (window)
        self.epochs = 0
        self.startup = None     # seconds from iter() to the first batch
        self.t_start = self.t_end = None
        self.snap0 = self.snap1 = None
        self.pin_tids = {}  # pin-memory thread id -> its (CPU, run-queue) seconds when last read
        self._after = None      # (wall, cpu) when the last batch was handed to the caller

    def _new_iter(self):
        self.it = iter(self.traced)
        self.epochs += 1
        t = getattr(self.it, "_pin_memory_thread", None)
        if t is not None and t.native_id:
            self.pin_tids.setdefault(t.native_id, (0.0, 0.0))

    def _read_pins(self):
        """The pin-memory threads' counters, read at every batch: a thread of an epoch that ended is gone from
        /proc with them, so its last reading stands."""
        for tid in self.pin_tids:
            now = _thread_sched(tid, None)
            if now is not None:
                self.pin_tids[tid] = now

    def _snap(self):
        self._read_pins()
        pin = list(self.pin_tids.values())
        return {"t": _time.monotonic(), "proc": _proc_sched("self"), "main": _thread_sched(_threading.get_native_id()),
                "pin": (sum(p[0] for p in pin), sum(p[1] for p in pin)), "io": _proc_io("self").get("read_bytes", 0),
                "busy": _busy_cpu_seconds()}

    def next(self, restart=True):
        """The next batch (with ``restart``, a new epoch when one ends; else StopIteration), timing the main
        thread's wait for it and the caller's step since the previous one."""
        now_w, now_c = _time.perf_counter(), _time.thread_time()
        if self._after is not None and self.t_start is not None:
            self.step[0] += now_w - self._after[0]
            self.step[1] += now_c - self._after[1]
        started = self.it is None
        if started:
            t_iter = _time.perf_counter()
            self._new_iter()
        while True:
            try:
                batch = next(self.it)
                break
            except StopIteration:
                if self.t_start is None and started:
                    raise DiagnoseError("sluice.torch.diagnose: the loader yields no batch") from None
                if not restart:
                    self.it = None
                    self._after = None
                    raise
                started = True
                t_iter = _time.perf_counter()
                self._new_iter()
        w, c = _time.perf_counter(), _time.thread_time()
        if self.t_start is None:  # the first batch: the workers' start-up is before the window
            self.startup = w - t_iter
            self.batch_bytes = _nbytes(batch)
            self.pickled_bytes = _nbytes(batch, tensors=False)
            self.t_start = _time.monotonic()
            self.snap0 = self._snap()
        else:
            self.wait[0] += w - now_w
            self.wait[1] += c - now_c
            self.batches += 1
        if self.pin_tids:
            self._read_pins()
        self._after = (_time.perf_counter(), _time.thread_time())
        return batch

    def end(self):
        r = _REC.get(self.dir)
        if r is not None and r.pid == _os.getpid():  # num_workers=0: the main process's own counters, now
            r.dump(force=True)
        if self.t_start is not None and self.snap1 is None:
            self.snap1 = self._snap()
            self.t_end = self.snap1["t"]

    def close(self):
        """Stops the workers and the pin-memory thread and removes the trace directory (also after an error or
        Ctrl-C)."""
        # The current iterator, and a persistent loader's own (kept between epochs, also when no epoch is running)
        its = [self.it] + [getattr(self.traced, "_iterator", None)]
        self.it = None
        try:
            queues = []
            for i, it in enumerate(its):
                if it is not None and hasattr(it, "_shutdown_workers") and it not in its[:i]:
                    queues += list(getattr(it, "_index_queues", None) or [])
                    queues += [getattr(it, "_worker_result_queue", None)]
                    it._shutdown_workers()
            # The queues' feeder threads: the shutdown closes the queues without joining them (they end on their own,
            # later on a busy machine); joined here, so that nothing of the diagnosis runs after it returns.
            for q in queues:
                t = getattr(q, "_thread", None)
                if t is not None and t.is_alive():
                    t.join(timeout=10)
        finally:
            if hasattr(self.traced, "_iterator"):
                self.traced._iterator = None
            self._workers = self._read_workers()
            _shutil.rmtree(self.dir, ignore_errors=True)
            r = _REC.pop(self.dir, None)
            if r is not None and r.pid == _os.getpid():
                fd, r.fd = r.fd, -1  # its exit hook (this process a multiprocessing child) writes nothing then
                _os.close(fd)

    def release(self):
        self.loader = self.traced = None

    def _read_workers(self):
        out = {}
        for f in _glob.glob(_os.path.join(self.dir, "w*.jsonl")):
            lines = []
            try:
                with open(f) as fh:
                    for line in fh:
                        try:
                            lines.append(_json.loads(line))
                        except ValueError:
                            pass  # a line cut by a worker's end
            except OSError:
                continue
            if lines:
                out[int(_os.path.basename(f)[1:-6])] = lines
        return out

    def worker_window(self):
        """The workers' counters over the window, summed: steps, samples, batches, CPU, run-queue, bytes read. In
        the main process itself when num_workers is 0."""
        tot = {"steps": {}, "samples": 0, "batches": 0, "cpu": 0.0, "runq": 0.0, "read_bytes": 0, "busy": 0.0,
               "startup_cpu": 0.0, "sizes": {}}
        for lines in self._workers.values():
            before = [x for x in lines if x["t"] <= self.t_start]
            upto = [x for x in lines if x["t"] <= self.t_end]
            if not upto:
                continue
            # A worker started in the window (a new epoch's): its start-up (process start to its first line,
            # written before its first sample) is told apart from its work.
            a, b = (before[-1] if before else lines[0]), upto[-1]
            if not before:
                tot["startup_cpu"] += a["cpu"]
            for k in ("samples", "batches", "cpu", "runq", "read_bytes"):
                tot[k] += b[k] - a[k]
            for name, s in b["steps"].items():
                s0 = a["steps"].get(name, [0, 0, 0])
                t = tot["steps"].setdefault(name, [0, 0.0, 0.0])
                for j in range(3):
                    t[j] += s[j] - s0[j]
            tot["busy"] += b["t"] - max(a["t"], self.t_start)
            for name, z in b.get("sizes", {}).items():
                t = tot["sizes"].setdefault(name, [0, 0, 0])
                for j in range(3):
                    t[j] += z[j]
        return tot


def _nbytes(batch, tensors=True, depth=0):
    """Bytes of the arrays in a batch: with ``tensors=False`` only those a worker pickles by value (numpy arrays,
    Python numbers; tensors go through shared memory)."""
    if isinstance(batch, _torch.Tensor):
        return batch.element_size() * batch.nelement() if tensors else 0
    if hasattr(batch, "nbytes"):
        return int(batch.nbytes)
    if isinstance(batch, (int, float)):
        return 0 if tensors else 8
    if depth > 4:
        return 0
    if isinstance(batch, dict):
        return sum(_nbytes(v, tensors, depth + 1) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(_nbytes(v, tensors, depth + 1) for v in batch)
    return 0
