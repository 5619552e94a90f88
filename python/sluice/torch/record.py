"""sluice.torch.record: the counters kept in every process that runs the dataset (the main process, each
worker): timed copies of the dataset's transform steps, its __getitem__/__iter__ and the collate, written as JSON
lines to the trace directory."""

import copy as _copy
import json as _json
import multiprocessing as _mp
import multiprocessing.util as _mp_util
import os as _os
import time as _time

import torch as _torch
from torch.utils.data import Dataset as _Dataset
from torch.utils.data import IterableDataset as _IterableDataset

from .machine import _proc_io, _proc_sched


# Calls of each step whose input and output sizes are taken (the cache what-if's bytes per sample).
_SIZE_SAMPLES = 8


# A worker writes its counters at most this often (seconds): the window's ends are read from these lines.
_DUMP_EVERY = 0.05
# Dataset attributes that hold the per-sample transforms (torchvision's datasets and most hand-written ones).
_TRANSFORM_ATTRS = ("transform", "target_transform", "transforms")  # "transforms" last: it may pair the first two


class _Recorder:
    """One process's counters: per step [calls, CPU s, wall s], samples and batches made, appended as JSON lines to
    its own file in the trace directory (the main process reads the window's ends from them)."""

    def __init__(self, tracedir):
        self.pid = _os.getpid()
        self.path = _os.path.join(tracedir, f"w{self.pid}.jsonl")
        self.fd = _os.open(self.path, _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND, 0o600)
        self.steps = {}
        self.sizes = {}  # step -> [calls sampled, input bytes, output bytes] of its first few calls
        self.samples = 0
        self.batches = 0
        self.last = 0.0
        self.t0 = _time.monotonic()
        self.dump(force=True)
        if _mp.parent_process() is not None:
            # A worker's last counters, written as it exits normally (an epoch's end, the loader's shutdown): a
            # short-lived worker would otherwise leave only its first line.
            _mp_util.Finalize(self, self.dump, kwargs={"force": True}, exitpriority=10)

    def add(self, name, cpu, wall):
        s = self.steps.get(name)
        if s is None:
            s = self.steps[name] = [0, 0.0, 0.0]
        s[0] += 1
        s[1] += cpu
        s[2] += wall

    def dump(self, force=False):
        now = _time.monotonic()
        if self.fd < 0 or (not force and now - self.last < _DUMP_EVERY):
            return
        self.last = now
        cpu, runq = _proc_sched("self")
        line = {"t": now, "t0": self.t0, "steps": self.steps, "sizes": self.sizes, "samples": self.samples,
                "batches": self.batches,
                "cpu": cpu, "runq": runq, "read_bytes": _proc_io("self").get("read_bytes", 0)}
        try:
            _os.write(self.fd, (_json.dumps(line) + "\n").encode())
        except OSError:
            pass  # the trace directory is gone: diagnose has ended, the worker is being shut down


_REC = {}  # tracedir -> _Recorder of this process
# A forked worker makes its own (checked without a getpid() system call on every sample).
_os.register_at_fork(after_in_child=_REC.clear)


def _rec(tracedir):
    r = _REC.get(tracedir)
    if r is None:
        r = _REC[tracedir] = _Recorder(tracedir)
    return r


class _TimedStep:
    """One transform step, timed (thread CPU and wall) into the process's recorder. Returns what the step returns."""

    def __init__(self, step, name, tracedir):
        self.step, self.name, self.tracedir = step, name, tracedir

    def __call__(self, *args, **kw):
        c0, t0 = _time.thread_time(), _time.perf_counter()
        out = self.step(*args, **kw)
        r = _rec(self.tracedir)
        r.add(self.name, _time.thread_time() - c0, _time.perf_counter() - t0)
        z = r.sizes.setdefault(self.name, [0, 0, 0])
        if z[0] < _SIZE_SAMPLES and args:  # what a cache after this step would hold (the cache what-if)
            z[0] += 1
            z[1] += _obj_bytes(args[0])
            z[2] += _obj_bytes(out)
        return out

    def __repr__(self):
        return repr(self.step)


def _obj_bytes(x):
    """Bytes of an image or array a step takes or returns (a PIL image's pixels; 0 for anything else)."""
    if isinstance(x, _torch.Tensor):
        return x.element_size() * x.nelement()
    if hasattr(x, "nbytes"):
        return int(x.nbytes)
    if hasattr(x, "getbands") and hasattr(x, "size"):
        return x.size[0] * x.size[1] * len(x.getbands())
    return 0


def _step_name(step, i, steps):
    """A step's class name (a function's name), with its index when the chain holds that class twice."""
    def base(s):
        n = type(s).__name__
        return getattr(s, "__name__", n) if n == "function" else n
    name = base(step)
    return f"{name} [{i}]" if sum(base(s) == name for s in steps) > 1 else name


def _timed_transform(t, tracedir, attr, names):
    """A copy of transform `t` whose steps are timed: a Compose's (v1 or v2: anything with a ``transforms`` list)
    steps one by one, a list of callables each, a single callable as one step."""
    steps = getattr(t, "transforms", None)
    if isinstance(steps, (list, tuple)) and steps and all(callable(s) for s in steps) and callable(t):
        tc = _copy.copy(t)
        wrapped = []
        for i, s in enumerate(steps):
            n = f"{attr}: {_step_name(s, i, steps)}" if attr != "transform" else _step_name(s, i, steps)
            names.append(n)
            wrapped.append(_TimedStep(s, n, tracedir))
        tc.transforms = type(steps)(wrapped) if isinstance(steps, list) else wrapped
        return tc
    if isinstance(t, (list, tuple)) and all(callable(s) for s in t):
        out = []
        for i, s in enumerate(t):
            n = f"{attr}: {_step_name(s, i, t)}" if attr != "transform" else _step_name(s, i, t)
            names.append(n)
            out.append(_TimedStep(s, n, tracedir))
        return type(t)(out)
    if callable(t):
        n = f"{attr}: {_step_name(t, 0, [t])}" if attr != "transform" else _step_name(t, 0, [t])
        names.append(n)
        return _TimedStep(t, n, tracedir)
    return t


def _timed_dataset_copy(ds, tracedir, names):
    """A shallow copy of the dataset with its transform attributes timed (the user's dataset is left as it is); a
    Subset's or ConcatDataset's inner datasets likewise (random_split gives Subsets)."""
    if isinstance(ds, _torch.utils.data.Subset):
        dc = _copy.copy(ds)
        dc.dataset = _timed_dataset_copy(ds.dataset, tracedir, names)
        return dc
    if isinstance(ds, _torch.utils.data.ConcatDataset):
        dc = _copy.copy(ds)
        seen = len(names)
        dc.datasets = [_timed_dataset_copy(d, tracedir, names) for d in ds.datasets]
        names[seen:] = list(dict.fromkeys(names[seen:]))  # the same step names from each part, once
        return dc
    found = [a for a in _TRANSFORM_ATTRS if getattr(ds, a, None) is not None and not isinstance(getattr(ds, a), str)]
    if not found:
        return ds
    dc = _copy.copy(ds)
    for a in found:
        t = getattr(ds, a)
        if a == "transforms" and type(t).__name__ == "StandardTransform":
            # torchvision's pair of the dataset's transform and target_transform: around the timed ones
            t = _copy.copy(t)
            t.transform, t.target_transform = getattr(dc, "transform", None), getattr(dc, "target_transform", None)
            setattr(dc, a, t)
        else:
            setattr(dc, a, _timed_transform(t, tracedir, a, names))
    return dc


def _sample_made(tracedir, c0, t0):
    r = _rec(tracedir)
    r.add("getitem", _time.thread_time() - c0, _time.perf_counter() - t0)
    r.samples += 1
    r.dump()


class _Traced:
    def __init__(self, inner, tracedir):
        self.inner, self.tracedir = inner, tracedir

    def __len__(self):
        return len(self.inner)


class _TracedMap(_Traced, _Dataset):
    """A map-style dataset timing ``inner[i]`` (its transform steps time themselves inside)."""

    def __getitem__(self, i):
        _rec(self.tracedir)  # a new worker's first line comes before its first sample
        c0, t0 = _time.thread_time(), _time.perf_counter()
        item = self.inner[i]
        _sample_made(self.tracedir, c0, t0)
        return item


class _TracedIterable(_Traced, _IterableDataset):
    """An iterable dataset timing each ``next()`` of the inner iterator (a sample: read, decode, transforms)."""

    def __iter__(self):
        _rec(self.tracedir)
        it = iter(self.inner)
        while True:
            c0, t0 = _time.thread_time(), _time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            _sample_made(self.tracedir, c0, t0)
            yield item


class _TimedCollate:
    def __init__(self, fn, tracedir):
        self.fn, self.tracedir = fn, tracedir

    def __call__(self, batch):
        c0, t0 = _time.thread_time(), _time.perf_counter()
        out = self.fn(batch)
        r = _rec(self.tracedir)
        r.add("collate", _time.thread_time() - c0, _time.perf_counter() - t0)
        r.batches += 1
        r.dump()
        return out
