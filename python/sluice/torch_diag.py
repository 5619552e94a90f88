"""sluice.torch.diagnose: the bottleneck of an existing torch DataLoader, its bound and what fixes it (issue 39).

The loader is traced as it is (a copy of it whose dataset, transforms and collate are timed: it yields what the
loader yields), the trace becomes a sluice trace (docs/trace-format.md; docs/python.md says how a loader's steps map
to stages), and the planner's model and LP (sluice analyze) give the bottleneck, the bound and the what-ifs, told in
words with the DataLoader settings that fix it and the same pipeline as a sluice spec.
"""

import copy as _copy
import glob as _glob
import json as _json
import math as _math
import multiprocessing as _mp
import multiprocessing.util as _mp_util
import os as _os
import select as _select
import shutil as _shutil
import signal as _signal
import sys as _sys
import tempfile as _tempfile
import threading as _threading
import time as _time

import torch as _torch
from torch.utils.data import DataLoader as _DataLoader
from torch.utils.data import Dataset as _Dataset
from torch.utils.data import IterableDataset as _IterableDataset

import sluice as _sluice

__all__ = ["diagnose", "tuned", "Report", "DiagnoseError"]

# Batches the window must hold for the planner to name a bottleneck (SL_PLAN_MIN_ELEMENTS): diagnose traces longer.
MIN_BATCHES = 32
# The most worker processes recommended per core, however blocked they are (each holds a copy of the dataset).
MAX_WORKERS_PER_CORE = 4
# Calls of each step whose input and output sizes are taken (the cache what-if's bytes per sample).
_SIZE_SAMPLES = 8
# torchvision steps whose output depends only on their input: a cache after them serves later epochs.
_DETERMINISTIC = {"Resize", "CenterCrop", "ToTensor", "PILToTensor", "Normalize", "ConvertImageDtype", "Grayscale",
                  "Pad", "ToImageTensor", "ToImage", "ConvertDtype", "ToDtype", "ToPureTensor"}
# A worker writes its counters at most this often (seconds): the window's ends are read from these lines.
_DUMP_EVERY = 0.05
# Dataset attributes that hold the per-sample transforms (torchvision's datasets and most hand-written ones).
_TRANSFORM_ATTRS = ("transform", "target_transform", "transforms")  # "transforms" last: it may pair the first two


class DiagnoseError(_sluice.Error):
    """The loader could not be traced (it yields nothing, or a setting cannot be copied)."""


# ---------------------------------------------------------------- in every process that runs the dataset

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


def _proc_sched(who):
    """(CPU seconds, run-queue seconds) of every thread of process `who` ("self" or a pid), from schedstat."""
    cpu = runq = 0
    for f in _glob.glob(f"/proc/{who}/task/*/schedstat"):
        try:
            with open(f) as fh:
                a = fh.read().split()
            cpu += int(a[0])
            runq += int(a[1])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended between the listing and the read
    return cpu / 1e9, runq / 1e9


def _thread_sched(tid, gone=(0.0, 0.0)):
    """(CPU seconds, run-queue seconds) of thread `tid` of this process; `gone` when it has ended."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as fh:
            a = fh.read().split()
        return int(a[0]) / 1e9, int(a[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return gone


def _proc_io(who):
    out = {}
    try:
        with open(f"/proc/{who}/io") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                out[k.strip()] = int(v)
    except (OSError, ValueError):
        pass
    return out


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


# ---------------------------------------------------------------- copies of a loader

def _loader_args(loader):
    """The arguments that make a DataLoader like `loader` (same dataset, sampler and collate)."""
    kw = dict(dataset=loader.dataset, num_workers=loader.num_workers, collate_fn=loader.collate_fn,
              pin_memory=loader.pin_memory, timeout=loader.timeout, worker_init_fn=loader.worker_init_fn,
              multiprocessing_context=loader.multiprocessing_context, generator=loader.generator,
              persistent_workers=loader.persistent_workers)
    if loader.num_workers > 0:
        kw["prefetch_factor"] = loader.prefetch_factor
    if getattr(loader, "pin_memory_device", ""):
        kw["pin_memory_device"] = loader.pin_memory_device
    if isinstance(loader.dataset, _IterableDataset):
        kw.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:  # batch_size, or a batch_sampler given (then batch_size is None)
        kw["batch_sampler"] = loader.batch_sampler  # holds the sampler, the batch size and drop_last
    else:
        kw.update(batch_size=None, sampler=loader.sampler)
    return kw


def _make_loader(kw, **over):
    kw = dict(kw, **over)
    if kw["num_workers"] == 0:  # torch refuses these without workers
        kw.pop("prefetch_factor", None)
        kw["persistent_workers"] = False
        kw["multiprocessing_context"] = None
    return _DataLoader(**kw)


def _batch_size(loader):
    """Samples in a batch (1 without auto-collation; a custom batch_sampler without batch_size: 1, unknown)."""
    if loader.batch_size is not None:
        return loader.batch_size
    return getattr(loader.batch_sampler, "batch_size", None) or 1


class _NullMap(_Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return None


class _NullIterable(_IterableDataset):
    def __iter__(self):
        while True:
            yield None


def _null_collate(batch):
    return batch


def _loop_cpu(loader, cpu=0.03):
    """(the DataLoader's own CPU per batch in the main process without workers, the CPU per batch its probes report
    around a dataset and collate that do nothing): its sampler, fetch loop and iterator, with the loader's batching,
    over samples that cost nothing, untraced and then traced as diagnose traces (`cpu` seconds of each at most).
    num_workers=0 adds the first to the samples' work, which no worker measures (a worker's loop is another, priced
    in its hand-off); the second is the tracing's own, in every getitem and collate figure and in no untraced run."""
    iterable = isinstance(loader.dataset, _IterableDataset) or not hasattr(loader.dataset, "__len__")
    kw = dict(num_workers=0, collate_fn=_null_collate)
    if loader.batch_size is not None or loader.batch_sampler is not None:
        kw.update(batch_size=_batch_size(loader), drop_last=False)
    else:
        kw["batch_size"] = None
    tracedir = _tempfile.mkdtemp(prefix="sluice-torch-")
    out = []
    try:
        for traced in (False, True):
            ds = _NullIterable() if iterable else _NullMap(1 << 30)
            if traced:
                ds = (_TracedIterable if iterable else _TracedMap)(ds, tracedir)
            it = iter(_DataLoader(ds, **dict(kw, collate_fn=_TimedCollate(_null_collate, tracedir) if traced else
                                             _null_collate)))
            next(it)  # the iterator's start and the first batch's: not a batch's
            r = _REC.get(tracedir)
            steps0 = {k: v[1] for k, v in r.steps.items()} if traced else {}
            n, c0 = 0, _time.thread_time()
            while _time.thread_time() - c0 < cpu and n < 100000:
                next(it)
                n += 1
            c = (_time.thread_time() - c0) / max(n, 1)
            out.append(c if not traced else
                       sum(v[1] - steps0.get(k, 0.0) for k, v in _REC[tracedir].steps.items()) / max(n, 1))
    finally:
        r = _REC.pop(tracedir, None)
        if r is not None:
            fd, r.fd = r.fd, -1
            _os.close(fd)
        _shutil.rmtree(tracedir, ignore_errors=True)
    return out[0], out[1]


# The no-workers probe: the CPU a batch costs without workers, measured in a forked child.
PROBE_CPU = 0.2    # seconds of the child's CPU on batches after its warm-up
PROBE_WALL = 0.6   # ... or of its wall clock, whichever comes first (a blocked dataset spends little CPU)
PROBE_TIMEOUT = 2.0  # the child is killed after this many seconds, plus 3x the batches it should take
PROBE_MAX_BATCH = 1.0  # a batch this slow in a worker (seconds) is not probed: two would take too long
PROBE_SEGMENTS = 5  # the budget is spent in this many segments (fewer when a batch takes more than one's share)
PROBE_GAP = 0.1  # seconds between them


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
    if not hasattr(_os, "fork"):
        return None, "no fork() on this platform"
    if batch_wall > PROBE_MAX_BATCH:
        return None, f"a batch takes {batch_wall:.1f} s in a worker: too slow to probe without workers"
    timeout = PROBE_TIMEOUT + 3 * (wall + (PROBE_SEGMENTS - 1) * PROBE_GAP + 2 * batch_wall)
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
                msg = _probe_child(loader, cpu, wall)
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
        return None, f"its fetch was stopped at the probe's timeout ({timeout:.1f} s)"
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


# ---------------------------------------------------------------- the machine

def _cores():
    n = len(_os.sched_getaffinity(0))
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            q, p = fh.read().split()[:2]
        if q != "max":
            n = min(n, int(q) / int(p))
    except (OSError, ValueError):
        pass
    return float(n)


def _meminfo():
    out = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                out[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out.get("MemTotal", 0), out.get("MemAvailable", 0)


def _busy_cpu_seconds():
    """CPU seconds the whole machine has been busy (/proc/stat: every state but idle and iowait)."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        hz = _os.sysconf("SC_CLK_TCK")
        return (sum(f[:8]) - f[3] - f[4]) / hz
    except (OSError, ValueError):
        return -1.0


# ---------------------------------------------------------------- tracing

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


def _check_seconds(seconds):
    if not (isinstance(seconds, (int, float)) and seconds > 0 and _math.isfinite(seconds)):
        raise ValueError(f"sluice.torch.diagnose: seconds must be a positive number, not {seconds!r}")


def diagnose(loader, seconds=20.0, cores=0, memory=0, spec_seconds=None):
    """Traces ``loader`` (a torch DataLoader) for ``seconds`` after its first batch (longer, up to 3x or 30 s more,
    until 32 batches have arrived: the planner needs them) and returns a Report: the
    bottleneck, the bound, what-ifs and the recommended settings (``print(report)``, ``report.to_dict()``,
    ``report.save_html(path)``). The loader itself is not changed: a copy with timed steps runs, yielding what the
    loader yields, and its workers are stopped before this returns (also on an error or Ctrl-C).

    ``seconds=None`` traces the caller's own loop instead: ``with sluice.torch.diagnose(loader, None) as report:``
    around the training loop (``for batch in loader: ...``), and the report is filled when the block ends; the
    time between batches is the training step (the consumer). ``cores`` and ``memory`` set the planner's budget
    (0: this machine's cores and half of the memory available). When every step has a sluice equivalent, the
    translated spec is planned for ``spec_seconds`` (default: a quarter of ``seconds``, 1 to 5 s; 0: not) to predict
    its rate (``Report.compare_spec``)."""
    report = Report(loader, cores=cores, memory=memory)
    if seconds is None:
        return report
    _check_seconds(seconds)
    tr = _Tracer(loader)
    try:
        deadline = None
        while True:
            tr.next()
            if deadline is None:
                deadline = _time.monotonic() + seconds
                cap = deadline + max(3 * seconds, 30.0)
            now = _time.monotonic()
            # The planner needs MIN_BATCHES batches in the window: a slow loader is traced for longer (up to cap).
            if now >= deadline and (tr.batches >= MIN_BATCHES or now >= cap):
                break
        tr.end()
    finally:
        tr.close()
    try:
        report._fill(tr, consumer=False)
    finally:
        tr.release()
    if spec_seconds is None:
        spec_seconds = min(5.0, max(1.0, seconds / 4))
    if spec_seconds > 0 and report.spec is not None and not report.python_steps:
        try:
            report.compare_spec(seconds=spec_seconds)
        except _sluice.Error as e:  # the diagnosis stands without it
            report._d["notes"].append(f"the translated spec did not run: {e}")
    return report


# ---------------------------------------------------------------- the sluice trace of a loader

def _op(path, kind, label, parent, par=1, buf=0, asyn=False, auto_par=False, auto_buf=False, n_out=0, n_in=0,
        nbytes=0, cpu=0.0, wall=0.0, wait=0.0, runq=None, disk=0, serial=False, card=-1, call_mean=0.0):
    o = {"path": path, "op": kind, "label": label, "parent": parent, "nested": False, "parallelism": max(int(par), 1),
         "buffer": int(buf), "async": asyn, "random": False, "autotune": {"parallelism": auto_par, "buffer": auto_buf},
         "elements_out": int(n_out), "elements_in": int(n_in), "bytes_out": int(nbytes), "cpu_seconds": max(cpu, 0.0),
         "wall_seconds": max(wall, cpu, 0.0), "wait_seconds": max(wait, 0.0), "disk_bytes": int(disk), "skipped": 0,
         "buffer_occupancy": 0.0, "bytes_held": 0, "bytes_held_peak": 0, "cardinality": int(card),
         "call_mean": call_mean, "call_sd": 0.0}
    if runq is not None:
        o["runq_seconds"] = max(runq, 0.0)
    if serial:
        o["serial"] = True
    return o


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


def _build_trace(tr, consumer):
    """The sluice trace of a traced loader and the figures it came from (docs/python.md: how steps map to stages)."""
    L = tr.loader
    W = L.num_workers
    T = tr.t_end - tr.t_start
    nb = tr.batches
    if nb < 1 or T <= 0:
        raise DiagnoseError(f"sluice.torch.diagnose: no batch arrived in the {T:.2f} s window after the first: trace "
                            "for longer (seconds=)")
    ww = tr.worker_window()
    s0, s1 = tr.snap0, tr.snap1
    per_batch = float(_batch_size(L))  # a last short batch aside
    samples = nb * per_batch
    k = samples / ww["samples"] if ww["samples"] > 0 else 0.0  # the workers' window scaled to the batches taken
    steps = ww["steps"]
    gi = steps.get("getitem", [0, 0.0, 0.0])
    co = steps.get("collate", [0, 0.0, 0.0])
    inner = {n: s for n, s in steps.items() if n not in ("getitem", "collate")}
    in_cpu = sum(s[1] for s in inner.values())
    in_wall = sum(s[2] for s in inner.values())
    # The parts of a sample's time: the named transform steps, the rest of __getitem__ (reading, decoding), the
    # collate; in a worker process also the hand-off (pickling the batch into shared memory or the pipe) and the
    # worker's loop, the process's CPU that no step holds.
    parts = {"__getitem__ (read, decode, rest)": [max(gi[1] - in_cpu, 0.0), max(gi[2] - in_wall, 0.0)]}
    for n, s in inner.items():
        parts[n] = [s[1], s[2]]
    parts["collate"] = [co[1], co[2]]
    step_cpu = sum(p[0] for p in parts.values())
    if W > 0:
        send = max(ww["cpu"] - step_cpu, 0.0)
        parts["send to the main process"] = [send, send]
        if ww["startup_cpu"] > 0:
            parts["worker start-up (each epoch)"] = [ww["startup_cpu"], ww["startup_cpu"]]
    work_cpu = sum(p[0] for p in parts.values()) * k
    work_wall = sum(p[1] for p in parts.values()) * k
    main_rq = max(s1["main"][1] - s0["main"][1], 0.0)
    # Without workers the work runs on the main thread, in next(): its run-queue delay is the work's.
    runq = ww["runq"] * k if W > 0 else main_rq
    disk = ww["read_bytes"] * k if W > 0 else max(s1["io"] - s0["io"], 0)
    pin_cpu, pin_rq = s1["pin"][0] - s0["pin"][0], s1["pin"][1] - s0["pin"][1]
    # The main thread in next(): taking batches from the workers (unpickling) and the loader's own work; without
    # workers the work itself, which the per-sample stage holds.
    transfer_cpu = max(tr.wait[1] - (work_cpu if W == 0 else 0.0), 0.0)
    step_wall, step_cpu_user = tr.step
    proc_cpu = (s1["proc"][0] - s0["proc"][0]) + ((ww["cpu"] + ww["startup_cpu"]) * k if W > 0 else 0.0)
    proc_rq = (s1["proc"][1] - s0["proc"][1]) + (ww["runq"] * k if W > 0 else 0.0)
    busy = s1["busy"] - s0["busy"] if s1["busy"] >= 0 and s0["busy"] >= 0 else -1
    other = max(busy / T - proc_cpu / T, 0.0) if busy >= 0 else -1
    mem_total, mem_avail = _meminfo()
    n_disp = len(L) if hasattr(L.dataset, "__len__") else -1
    B = int(round(per_batch))
    name = f"DataLoader({type(L.dataset).__name__})"
    spec_ops = [{"op": "range", "stop": max(n_disp * B if n_disp > 0 else 1 << 40, 1)},
                {"op": "map", "fn": "sample: " + " > ".join(parts), "parallelism": "autotune"},
                {"op": "batch", "size": max(B, 1)}]
    ops = [_op("ops[0]", "range", "sampler", 1, n_out=samples, n_in=0, card=-1),
           _op("ops[1]", "map", "workers: dataset[i], transforms, collate, send" if W else
               "dataset[i], transforms, collate (main process)", 2, par=max(W, 1), buf=max(W, 1), asyn=W > 0,
               auto_par=True, n_out=samples, n_in=samples, cpu=work_cpu, wall=work_wall, runq=runq, disk=disk,
               call_mean=work_wall / samples if samples else 0.0),
           _op("ops[2]", "batch", "batch", 3, n_out=nb, n_in=samples)]
    if W > 0:
        spec_ops.append({"op": "prefetch", "buffer": "autotune"})
        ops.append(_op("ops[3]", "prefetch", "worker queue (prefetch_factor x num_workers)", 4,
                       buf=W * (L.prefetch_factor or 2), asyn=True, auto_buf=True, n_out=nb, n_in=nb,
                       wall=tr.wait[0], wait=tr.wait[0]))
    main_parts = [("main", "map", "main process: take batches (unpickle)", transfer_cpu, transfer_cpu,
                   main_rq if W > 0 else None)]
    if tr.pin_tids:
        main_parts.append(("pin", "map", "pin-memory thread", pin_cpu, pin_cpu, pin_rq))
    if consumer:
        main_parts.append(("step", "map", "your training step", step_cpu_user, step_wall, None))
    for key, kind, label, cpu, wall, rq in main_parts:
        i = len(ops)
        spec_ops.append({"op": kind, "fn": label})
        ops.append(_op(f"ops[{i}]", kind, label, i + 1, n_out=nb, n_in=nb, cpu=cpu, wall=wall, runq=rq,
                       serial=True))
    ops[-1]["parent"] = -1
    nbytes = getattr(tr, "batch_bytes", 0)
    for o in ops[2:]:
        o["bytes_out"] = int(nbytes * nb)
    trace = {"format": "sluice-trace", "version": 1, "sluice": _sluice.__version__, "origin": name,
             "spec": {"name": name, "ops": spec_ops},
             "machine": {"cores": _cores(), "cpus_online": _os.cpu_count() or 1, "mem_total": mem_total,
                         "mem_available": mem_avail, "disk_bandwidth": 0.0, "disk_method": "none", "disk_path": "",
                         "other_load": other},
             "run": {"seconds": T, "elements": nb, "ended": False, "throughput": nb / T,
                     "process_cpu_seconds": proc_cpu, "run_delay": proc_rq / proc_cpu if proc_cpu > 0 else 0.0},
             "ops": ops}
    figures = {"seconds": T, "batches": nb, "samples_per_batch": per_batch, "parts": parts, "k": k,
               "work_cpu": work_cpu, "work_wall": work_wall, "worker_runq": runq, "disk_bytes": disk,
               "transfer_cpu": transfer_cpu, "wait": tr.wait[0], "idle": max(tr.wait[0] - tr.wait[1], 0.0),
               "pin_cpu": pin_cpu if tr.pin_tids else None,
               "step_wall": step_wall if consumer else None, "step_cpu": step_cpu_user if consumer else None,
               "other_load": other, "startup": tr.startup, "epochs": tr.epochs, "worker_busy": ww["busy"],
               "sizes": ww["sizes"], "order": list(tr.steps)}
    return trace, figures


# ---------------------------------------------------------------- the equivalent sluice spec

_INTERP = {"bilinear": "bilinear", "bicubic": "bicubic", "nearest": "nearest"}
# torchvision.io's read modes as sluice decode_image's channels (GRAY_ALPHA, two channels, has none)
_IO_MODES = {"UNCHANGED": 0, "GRAY": 1, "RGB": 3, "RGB_ALPHA": 4}


def _pair(size):
    if isinstance(size, int):
        return [size, size]
    size = list(size)
    return [int(size[0]), int(size[-1])] if size else None


def _interp(t):
    mode = getattr(t, "interpolation", None)
    name = getattr(mode, "value", mode)
    return _INTERP.get(str(name).lower()) if name is not None else "bilinear"


def _resample(t, state):
    """(sluice's resize method, None) when sluice resizes as step `t` does on its input (a PIL image, state "pil",
    or a uint8 tensor, "u8"), else (None, why not)."""
    m = _interp(t)
    mode = getattr(getattr(t, "interpolation", None), "value", getattr(t, "interpolation", None))
    if m is None:
        return None, f"its interpolation {mode!r} has no sluice equivalent"
    if state == "pil":  # PIL resizes with its filters widened by the shrink (antialiased) whatever `antialias` says
        return m, None
    if m == "nearest":
        return None, "nearest on a tensor (torch's) picks other pixels than PIL's nearest, which sluice's follows"
    if getattr(t, "antialias", None) is not True:
        return None, ("on a tensor without antialias=True: sluice resizes with an antialiasing filter (as PIL and "
                      "antialias=True do)")
    return m, None


def _io_decoder(fn):
    """sluice decode_image's args for a torchvision.io decoder given as a DatasetFolder's loader (decode_image or
    read_image, or a functools.partial of one setting mode or apply_exif_orientation), else None."""
    import functools
    try:
        import torchvision.io as tio
    except ImportError:
        return None
    kw = {}
    if isinstance(fn, functools.partial):
        if fn.args:
            return None
        fn, kw = fn.func, dict(fn.keywords)
    if fn not in [f for f in (getattr(tio, "decode_image", None), getattr(tio, "read_image", None)) if f]:
        return None
    mode = kw.pop("mode", "UNCHANGED")
    orient = kw.pop("apply_exif_orientation", False)
    channels = _IO_MODES.get(str(getattr(mode, "name", mode)).upper())
    if kw or channels is None:
        return None
    return dict({"channels": channels}, **({"orient": True} if orient else {}))


def _float_scale(t):
    """The scale of a uint8 -> float32 step (v2 ToDtype, ConvertImageDtype), None for any other conversion."""
    dtype = getattr(t, "dtype", None)
    if type(t).__name__ == "ToDtype":
        return (1 / 255 if t.scale else 1.0) if dtype == _torch.float32 else None
    return 1 / 255 if dtype == _torch.float32 else None


class _PyStep:
    """A loader step with no sluice equivalent, as a sluice map function: the element's image handed to the step in
    the form the loader's chain had there (a PIL image before the to-tensor step, a CHW tensor after it)."""

    def __init__(self, step, tensor, component="image"):
        self.step, self.tensor, self.component = step, tensor, component

    def __call__(self, e, rng=None):
        import numpy as np
        x = e[self.component]
        if self.tensor:
            y = self.step(_torch.from_numpy(np.array(x)))
        else:
            from PIL import Image
            y = self.step(Image.fromarray(np.ascontiguousarray(x)))
        out = dict(e)
        out[self.component] = y.numpy() if isinstance(y, _torch.Tensor) else np.asarray(y)
        return out


class _ToCHW:
    """sluice's HWC uint8 image as the uint8 CHW tensor PILToTensor, ToImage or a torchvision.io decoder gives (no
    sluice function writes uint8 CHW)."""

    def __call__(self, e, rng=None):
        import numpy as np
        out = dict(e)
        out["image"] = np.ascontiguousarray(np.transpose(e["image"], (2, 0, 1)))
        return out


class _PyDataset:
    """``dataset[i]`` as a sluice map function over a ``range`` op: the sample's parts as components "0", "1", ..."""

    def __init__(self, ds):
        self.ds = ds

    def __call__(self, e, rng=None):
        import numpy as np
        item = self.ds[int(e["value"])]
        parts = item if isinstance(item, (tuple, list)) else (item,)
        return {str(j): (p.numpy() if isinstance(p, _torch.Tensor) else p if isinstance(p, (int, float, bytes))
                         else np.asarray(p)) for j, p in enumerate(parts)}


def _translate_steps(steps, state, register, notes):
    """The sluice ops of a chain of torchvision transforms (v1 or v2) after the decode. `state` is what the next
    step takes: "pil" (a PIL image: sluice's HWC uint8 image), "u8" (a uint8 CHW tensor, from ToImage, PILToTensor
    or a torchvision.io decoder: sluice's image stays HWC, its image functions apply, and the channels go first at
    the float conversion, or in a Python step where none comes) or "tensor" (sluice holds what the chain holds).
    Steps without an equivalent are registered Python steps; those with one that cannot match say why in `notes`."""
    ops = []
    made_u8 = "torchvision.io decoder"

    def to_chw():
        ops.append(register(_ToCHW(), "".join(c for c in made_u8 if c.isalnum()), random=False))
        return "tensor"

    for t in steps:
        kind = type(t).__name__
        v2 = type(t).__module__.startswith("torchvision.transforms.v2")
        prev = ops[-1] if ops else {}
        image = state in ("pil", "u8")
        why = None
        if kind == "RandomResizedCrop" and image:
            m, why = _resample(t, state)
            if m:
                ops.append({"op": "map", "fn": "random_resized_crop", "parallelism": "autotune",
                            "args": {"size": _pair(t.size), "scale": list(t.scale), "ratio": list(t.ratio),
                                     "method": m}})
                continue
        elif kind == "Resize" and image and getattr(t, "size", None) is not None:
            m, why = _resample(t, state)
            if getattr(t, "max_size", None) is not None:
                m, why = None, "max_size has no sluice equivalent"
            if m:
                a = {"shorter_side": int(t.size if isinstance(t.size, int) else t.size[0])} \
                    if isinstance(t.size, int) or len(t.size) == 1 else {"size": _pair(t.size)}
                a["method"] = m
                ops.append({"op": "map", "fn": "resize", "args": a, "parallelism": "autotune"})
                continue
        elif kind == "CenterCrop" and image:
            ops.append({"op": "map", "fn": "center_crop", "args": {"size": _pair(t.size)}, "parallelism": "autotune"})
            continue
        elif kind == "RandomHorizontalFlip" and image:
            ops.append({"op": "map", "fn": "random_flip", "args": {"prob": float(t.p)}, "parallelism": "autotune"})
            continue
        elif kind in ("ToTensor", "ToImageTensor") and state == "pil":
            ops.append({"op": "map", "fn": "normalize", "parallelism": "autotune",
                        "args": {"scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "layout": "CHW"}})
            state = "tensor"
            continue
        elif kind in ("ToImage", "PILToTensor") and state == "pil":
            state, made_u8 = "u8", kind
            continue
        elif v2 and kind in ("ToImage", "PILToTensor", "ToTensor", "ToPureTensor") and state == "u8" or \
                v2 and kind == "ToPureTensor" and state == "tensor":
            continue  # v2 passes a tensor through these (ToImage only marks it an Image): the same values
        elif kind in ("ToDtype", "ConvertImageDtype", "ConvertDtype") and state == "u8":
            scale = _float_scale(t)
            if scale is not None:
                ops.append({"op": "map", "fn": "normalize", "parallelism": "autotune",
                            "args": {"scale": scale, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
                                     "layout": "CHW"}})
                state = "tensor"
                continue
            why = f"to {getattr(t, 'dtype', None)}: only float32 translates"
        elif kind == "Normalize" and state == "tensor" and prev.get("fn") == "normalize" and \
                prev["args"]["mean"] == [0.0, 0.0, 0.0] and prev["args"]["std"] == [1.0, 1.0, 1.0]:
            prev["args"]["mean"] = [float(x) for x in t.mean]
            prev["args"]["std"] = [float(x) for x in t.std]
            continue
        if why:
            notes.append(f"{'v2.' if v2 else ''}{kind} stays a Python step: {why}")
        if state == "u8":
            state = to_chw()
        name = kind if kind != "function" else getattr(t, "__name__", "fn")
        ops.append(register(_PyStep(t, state == "tensor"), "".join(c for c in name if c.isalnum()) or "fn"))
    if state == "u8":
        to_chw()
    return ops


def _translate(loader):
    """(spec, python steps, notes): the loader as a sluice spec; steps without a sluice equivalent are registered
    Python functions (named in the list), which the spec calls by name."""
    ds = loader.dataset
    B = _batch_size(loader)
    python, notes = [], []
    tag = f"{id(loader) & 0xffffff:06x}"

    def register(obj, label, random=True):
        name = f"torch_{label}_{tag}_{len(python)}"
        _sluice.register_fn(name, obj, random=random)
        python.append(name)
        return {"op": "map", "fn": name, "parallelism": "autotune"}

    # An image folder: PIL's loader gives an RGB PIL image (decode_image, 3 channels); a torchvision.io decoder a
    # uint8 CHW tensor with the channels its mode says (UNCHANGED: as stored).
    decode, state = None, None
    try:
        from torchvision.datasets import DatasetFolder
        from torchvision.datasets.folder import default_loader, pil_loader
        if isinstance(ds, DatasetFolder):
            if getattr(ds, "loader", None) in (default_loader, pil_loader):
                decode, state = {"channels": 3}, "pil"
            else:
                decode, state = _io_decoder(getattr(ds, "loader", None)), "u8"
    except ImportError:
        pass
    sampler = type(getattr(loader, "sampler", None)).__name__
    shuffle = sampler == "RandomSampler"
    if sampler not in ("RandomSampler", "SequentialSampler", "_InfiniteConstantSampler"):
        notes.append(f"the sampler ({sampler}) is not translated: the spec reads every sample, in order")
    if decode is not None:
        ops = [{"op": "image_folder", "root": str(ds.root), "shuffle": shuffle},
               {"op": "map", "fn": "decode_image", "args": decode, "parallelism": "autotune"}]
        steps = getattr(ds.transform, "transforms", None) if ds.transform is not None else []
        if steps is None:
            steps = [ds.transform]
        ops += _translate_steps(steps, state, register, notes)
        if getattr(ds, "target_transform", None) is not None:
            notes.append("target_transform is not translated: the spec yields the class index as 'label'")
        ops.append({"op": "map", "fn": "select", "args": {"keep": ["image", "label"]}})
    else:
        if isinstance(ds, _IterableDataset) or not hasattr(ds, "__len__"):
            return None, [], ["an iterable dataset has no sluice equivalent here: only map-style datasets translate"]
        ops = [{"op": "range", "stop": len(ds)}]
        if shuffle:
            ops.append({"op": "shuffle", "buffer": len(ds)})
        ops.append(register(_PyDataset(ds), type(ds).__name__ or "dataset"))
        notes.append(f"{type(ds).__name__}[i] stays a Python function (only torchvision image folders, read by "
                     "PIL or a torchvision.io decoder, translate to sluice's readers and decoders)")
    if loader.batch_sampler is not None:
        drop = getattr(loader.batch_sampler, "drop_last", loader.drop_last)
        ops.append({"op": "batch", "size": int(B), "drop_remainder": bool(drop)})
    ops.append({"op": "prefetch", "buffer": "autotune"})
    return {"name": f"{type(ds).__name__} (from a DataLoader)", "ops": ops}, python, notes


# ---------------------------------------------------------------- the report

def _verdict(rep, trace, fig, tr, W, part_cpu):
    """The bottleneck in words: {"kind", "stage", "words", "step", "step_share"} from the planner's bottleneck op
    and the measured parts of the workers' stage."""
    T, nb = fig["seconds"], fig["batches"]
    bpath = rep.get("bottleneck")
    bi = int(bpath[4:-1]) if bpath else -1
    bop = trace["ops"][bi] if bi >= 0 else None
    total = sum(part_cpu.values()) or 1.0
    top = max(part_cpu, key=part_cpu.get) if part_cpu else None
    share = part_cpu[top] / total if top else 0.0
    blocked = max(fig["work_wall"] - fig["work_cpu"] - (fig["worker_runq"] or 0.0), 0.0)
    planned_w = int(rep["ops"][1].get("planned_parallelism") or max(W, 1))
    budget = rep["budget"]["cores"]
    kind = "step"
    if rep.get("too_short"):
        kind, words = "too short", (f"the trace is too short: {nb} batches (the planner needs {MIN_BATCHES}); "
                                    "trace for longer")
    elif bop is None:
        kind, words = "none", "no bottleneck: every stage costs nothing measurable"
    elif bi == 1:
        if fig["work_wall"] > 0 and blocked > 0.5 * fig["work_wall"]:
            kind = "disk" if fig["disk_bytes"] > 0 else "blocked"
            what = "reading from disk" if kind == "disk" else "blocked (I/O, sleeps or locks)"
            words = (f"{'disk' if kind == 'disk' else 'waiting'}: the workers spend {_pct(blocked / fig['work_wall'])}"
                     f" of their time {what}" +
                     (f" ({fig['disk_bytes'] / T / 1e6:.1f} MB/s read)" if fig["disk_bytes"] else "") +
                     "; more workers overlap the waits")
        elif top == "worker start-up (each epoch)":
            kind = "worker start-up"
            words = (f"the workers' start-up: {_pct(share)} of worker CPU (new worker processes every epoch; "
                     "persistent_workers=True keeps them)")
        elif W == 0:
            kind = "num_workers=0"
            words = f"num_workers=0: the main process loads every sample itself; {top} takes {_pct(share)} of that CPU"
        elif planned_w > W and W < budget - 0.5:
            kind = "too few workers"
            words = (f"too few workers: {W} worker process{'es' if W > 1 else ''} for {budget:g} cores; {top} is "
                     f"{_pct(share)} of worker CPU")
        else:
            words = f"{top}: {_pct(share)} of worker CPU (the workers keep the cores busy)"
    elif bop["label"].startswith("main process"):
        kind = "main process"
        words = (f"the main process spends {_pct(fig['transfer_cpu'] / T)} of its time unpickling batches (taking "
                 f"them from the workers: {1e3 * fig['transfer_cpu'] / nb:.2f} ms a batch)")
        pb = getattr(tr, "pickled_bytes", 0)
        if pb > 0.5 * max(getattr(tr, "batch_bytes", 0), 1):
            words += (f"; {pb / 1e6:.1f} MB of each batch is numpy arrays or Python objects, pickled by value: as "
                      "torch tensors they would pass through shared memory")
    elif bop["label"].startswith("pin-memory"):
        kind = "pin memory"
        words = f"the pin-memory thread: {_pct(fig['pin_cpu'] / T)} of a core copying batches into pinned memory"
    elif bop["label"].startswith("your training step"):
        kind = "training step"
        words = (f"your training step ({_pct(fig['step_wall'] / T)} of the main process's time): the loader keeps "
                 "up; the input pipeline is not the bottleneck")
    else:
        words = bop["label"]
    return {"kind": kind, "stage": bop["label"] if bop else None, "words": words, "step": top, "step_share": share,
            "planned_workers": planned_w}


class _Model:
    """The loader's rate from its stage costs per batch, for other settings: the workers' stage at min(workers,
    cores) over its cost, the main process (serial: the GIL) at one batch per its cost, all under the cores' CPU.
    Without workers the main process does the work but pickles and unpickles nothing and starts no worker;
    persistent workers start once, not every epoch."""

    def __init__(self, fig, W, avail, persistent=False):
        nb, k, parts = fig["batches"], fig["k"], fig["parts"]
        self.avail = avail
        self.blocked = max(fig["work_wall"] - fig["work_cpu"] - (fig["worker_runq"] or 0.0), 0.0)
        self.cw = (fig["work_cpu"] + self.blocked) / nb  # a worker is busy for its CPU and its blocked time
        self.cw_cpu = fig["work_cpu"] / nb
        self.main = (fig["transfer_cpu"] + (fig["pin_cpu"] or 0.0) + (fig["step_wall"] or 0.0)) / nb
        self.cpu = (fig["work_cpu"] + fig["transfer_cpu"] + (fig["pin_cpu"] or 0.0) + (fig["step_cpu"] or 0.0)) / nb
        self.startup = parts.get("worker start-up (each epoch)", [0.0])[0] * k / nb
        send = parts.get("send to the main process", [0.0])[0] * k / nb
        p0 = fig.get("no_workers") if W > 0 else None
        self.W, self.persistent, self.probed = W, persistent, bool(p0)
        if p0:
            # The loader's own fetch without workers, measured in a forked child (_probe_no_workers): samples,
            # collate and the loader's loop, none of it slowed by pickling batches between them
            self.cost0 = p0["cpu"] + p0["blocked"] + ((fig["pin_cpu"] or 0.0) + (fig["step_wall"] or 0.0)) / nb
        else:
            # Without workers the main process runs the loader's own loop too (sampler, fetch, iterator: the main
            # thread's CPU in next() holds it when W is 0; no worker figure does, a worker's loop being its
            # hand-off's); the probes' CPU in the getitem and collate figures is the tracing's, in no untraced run.
            self.cost0 = (fig["work_cpu"] + self.blocked + (fig["pin_cpu"] or 0.0) + (fig["step_wall"] or 0.0) +
                          (fig["transfer_cpu"] if W == 0 else 0.0)) / nb - send - self.startup + \
                (fig.get("loop_cpu", 0.0) if W > 0 else 0.0) - fig.get("probe_cpu", 0.0)

    def predict(self, w, measured):
        """Batches/s with `w` workers: the `measured` rate at the loader's own setting times the model's ratio (the
        model's errors common to both settings cancel), but num_workers=0 probed without workers at its own rate:
        a measurement of that setting, which the ratio would give the model's error at the loader's setting."""
        if w == 0 and self.probed:
            return self.rate(0)
        base = self.rate(self.W, self.persistent)
        return measured * self.rate(w) / base if base > 0 else measured

    def rate(self, w, persistent=True, saved=0.0):
        """Batches/s with `w` workers; `saved`: worker CPU per batch that a cache would spare."""
        inf = float("inf")
        if w == 0:  # all on the main thread: at most a core, fewer when other load leaves less
            return min(1.0, self.avail) / (self.cost0 - saved) if self.cost0 > saved else inf
        drop = (self.startup if persistent else 0.0) + saved
        c, cc, a = self.cw - drop, self.cw_cpu - drop, self.cpu - drop
        # w workers each busy c a batch, their CPU on at most the cores left; blocked time overlaps across workers
        return min(w / c if c > 0 else inf, min(w, self.avail) / cc if cc > 0 else inf,
                   1 / self.main if self.main > 0 else inf, self.avail / a if a > 0 else inf)


def _cache_whatif(L, rep, fig, model, measured):
    """A cache of the samples after the deterministic steps (loading, decoding and the transform steps before the
    first random one), as sluice's `cache` op would hold them: its bytes for the dataset, whether they fit the
    memory budget, and the rate with that work spared. None for an iterable dataset or unknown sizes."""
    if isinstance(L.dataset, _IterableDataset) or not hasattr(L.dataset, "__len__"):
        return None
    order, sizes, parts, k, nb = fig["order"], fig["sizes"], fig["parts"], fig["k"], fig["batches"]
    prefix = []
    for n in order:
        if n.split(" [")[0] not in _DETERMINISTIC:
            break
        prefix.append(n)
    if prefix:
        z = sizes.get(prefix[-1])
        per = z[2] / z[0] if z and z[0] else 0
    else:
        z = sizes.get(order[0]) if order else None
        per = z[1] / z[0] if z and z[0] else 0
    if per <= 0:
        return None
    saved = (parts.get("__getitem__ (read, decode, rest)", [0.0])[0] + sum(parts[n][0] for n in prefix if n in parts))
    saved = saved * k / nb
    nbytes = per * len(L.dataset)
    budget = rep["budget"]["memory"]
    base = model.rate(L.num_workers, L.persistent_workers)
    return {"after": prefix[-1] if prefix else "loading and decoding", "bytes": nbytes, "fits": nbytes <= budget,
            "memory_budget": budget, "batches_per_s": model.rate(max(L.num_workers, 0), L.persistent_workers,
                                                                  saved) / base * measured if base > 0 else None}


def _recommend(L, rep, fig, model, kind, measured):
    """num_workers (the planner's parallelism of the workers' op; 0 when the hand-off costs more than the work it
    spreads), prefetch_factor (the planner's queue over the workers), persistent_workers, pin_memory: each
    {"value", "was", "why"}, num_workers with its predicted rate."""
    W = L.num_workers
    # Each worker is a process holding a copy of the dataset: at most MAX_WORKERS_PER_CORE per core.
    planned_w = min(int(rep["ops"][1].get("planned_parallelism") or max(W, 1)),
                    max(W, MAX_WORKERS_PER_CORE * _math.ceil(rep["budget"]["cores"])))
    rec_w = planned_w if (W > 0 or planned_w > 1 or model.cw > model.main) else W
    if kind == "main process" and W > 0:
        rec_w = max(1, min(W, planned_w))
    if rec_w > 0 and model.predict(0, measured) > 1.1 * model.predict(rec_w, measured):
        rec_w = 0
    base = model.rate(W, L.persistent_workers)
    gain = model.predict(rec_w, measured) / measured if measured > 0 else 1.0
    pred = f"predicted {_rate(measured * gain)} batches/s ({gain:.2f}x)"
    out = {"num_workers": {"value": rec_w, "was": W, "predicted": measured * gain,
                           "why": (f"keep {W}: more workers would not raise the rate" if rec_w == W else
                                   f"0: without workers no batch is pickled; {pred}" if rec_w == 0 else
                                   f"{rec_w} worker{'s' if rec_w > 1 else ''}: {pred}" if rec_w > W else
                                   f"{rec_w} worker{'s keep' if rec_w > 1 else ' keeps'} up: {pred} with fewer "
                                   "processes")}}
    if rec_w > 0:
        pbuf = rep["ops"][3].get("planned_buffer") if W > 0 else 0
        pf = max(2, _math.ceil((pbuf or 0) / rec_w))
        out["prefetch_factor"] = {"value": pf, "was": L.prefetch_factor if W else None,
                                  "why": f"{pf} batches per worker queued ahead" +
                                         (f" (the planner's buffer: {pbuf} batch{'es' if pbuf > 1 else ''} in all)"
                                          if pbuf else "") +
                                         " absorb the variance of batch times"}
        epoch = len(L) / measured if hasattr(L.dataset, "__len__") and measured > 0 else None
        su = fig["startup"] or 0.0
        pg = model.rate(W, True) / base if W > 0 and base > 0 else 1.0
        out["persistent_workers"] = {
            "value": True, "was": L.persistent_workers,
            "why": ("keep: the workers stay between epochs" if L.persistent_workers else
                    f"keeps the workers between epochs: saves their start-up, {su:.2f} s before the first batch" +
                    (f" ({_pct(su / (epoch + su))} of an epoch)" if epoch else "") +
                    (f" and {1e3 * model.startup:.2f} ms of worker CPU a batch: {pg:.2f}x at {W} workers"
                     if model.startup > 0 and W > 0 else ""))}
    cuda = _torch.cuda.is_available()
    pin_cost = fig["pin_cpu"] / fig["seconds"] if fig["pin_cpu"] is not None else None
    out["pin_memory"] = {
        "value": bool(cuda), "was": L.pin_memory,
        "why": ("batches copy to the GPU from pinned memory without a staging copy, asynchronously" if cuda else
                "no CUDA device: pinned memory buys nothing" +
                (f" and its thread costs {_pct(pin_cost)} of a core" if pin_cost else ""))}
    return out


def _pct(x):
    return f"{100 * x:.0f}%"


def _size(b):
    return f"{b / 1e9:.1f} GB" if b >= 1e9 else f"{b / 1e6:.1f} MB" if b >= 1e6 else f"{b / 1e3:.0f} kB"


def _rate(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


class Report:
    """What ``diagnose`` found: ``print(report)`` (the words), ``to_dict()`` (the figures: ``bottleneck``,
    ``bound``, ``measured``, ``recommend``, ...), ``save_html(path)`` (the ``sluice report`` page of the loader's
    trace, with the words on top), ``spec`` (the same pipeline in sluice, or None) and ``trace`` (the sluice
    trace, the JSON ``sluice analyze`` reads). Also a context manager: ``diagnose(loader, None)``."""

    def __init__(self, loader, cores=0, memory=0):
        self.loader = loader
        self.cores, self.memory = cores, memory
        self._d = None
        self._tracer = None
        self._orig_class = None
        self.trace = None
        self.spec = None
        self.python_steps = []
        self._html = None

    # -- the context manager: trace the caller's loop over `loader`
    def __enter__(self):
        self._begin()
        return self

    def __exit__(self, et, ev, tb):
        self._finish(ok=et is None or issubclass(et, _Stop))
        return False

    def _begin(self, deadline=None):
        tr = self._tracer = _Tracer(self.loader)
        self._orig_class = cls = type(self.loader)

        def traced_iter(loader):
            tr.it = None
            while True:
                if deadline is not None and tr.t_start is not None and _time.monotonic() - tr.t_start >= deadline:
                    raise _Stop()
                try:
                    b = tr.next(restart=False)
                except StopIteration:
                    return
                yield b

        sub = type(cls.__name__, (cls,), {"__iter__": traced_iter, "__module__": cls.__module__})
        object.__setattr__(self.loader, "__class__", sub)

    def _finish(self, ok):
        tr = self._tracer
        try:
            tr.end()
        finally:
            object.__setattr__(self.loader, "__class__", self._orig_class)
            tr.close()
        try:
            if ok:
                if tr.t_start is None:
                    raise DiagnoseError("sluice.torch.diagnose: the loader was not iterated inside the with block")
                self._fill(tr, consumer=True)
        finally:
            # The traced __iter__'s class is garbage in a cycle, collected late: it must not keep the user's loader
            # (and its persistent workers) alive through the tracer.
            tr.release()
            self._tracer = None

    # -- analysis
    def _fill(self, tr, consumer):
        trace, fig = _build_trace(tr, consumer)
        fig["loop_cpu"], fig["probe_cpu"] = _loop_cpu(self.loader)
        fig["no_workers"], no_probe = None, None
        if self.loader.num_workers > 0:  # without workers the traced run measured num_workers=0 itself
            fig["no_workers"], no_probe = _probe_no_workers(self.loader, fig["work_wall"] / fig["batches"])
        self.trace = trace
        res = _sluice._sluice.analyze_trace(_json.dumps(trace), cores=self.cores, memory=self.memory,
                                            only_autotune=True, no_cache=True, html=False)
        rep = self._analysis = _json.loads(res["report"])
        L = self.loader
        T, nb, k, per = fig["seconds"], fig["batches"], fig["k"], fig["samples_per_batch"]
        measured = nb / T
        part_cpu = {n: p[0] * k for n, p in fig["parts"].items()}
        total_part = sum(part_cpu.values()) or 1.0
        v = _verdict(rep, trace, fig, tr, L.num_workers, part_cpu)
        model = _Model(fig, L.num_workers, rep["budget"]["cores"] if self.cores else
                       max(rep["budget"]["cores"] - max(fig["other_load"], 0.0), 1.0), L.persistent_workers)
        recommend = _recommend(L, rep, fig, model, v["kind"], measured)
        base = model.rate(L.num_workers, L.persistent_workers)
        self.spec, self.python_steps, notes = _translate(L)
        if no_probe:
            notes.append("num_workers=0 is priced from the workers' figures (which carry their hand-off: pickling "
                         f"batches slows the steps between): the probe without workers gave no figure: {no_probe}")
        pin_cost = fig["pin_cpu"] / T if fig["pin_cpu"] is not None else None
        self._d = {
            "bottleneck": v,
            "bound": rep.get("bound"),
            "predicted": rep.get("predicted") or 0.0,
            "limit": rep.get("limit"),
            "measured": {"batches_per_s": measured, "samples_per_s": measured * per, "seconds": T, "batches": nb,
                         "samples_per_batch": per, "main_waiting": fig["idle"] / T,
                         "main_unpickling": fig["transfer_cpu"] / T, "training_step": (fig["step_wall"] / T)
                         if fig["step_wall"] is not None else None,
                         "worker_cpu_per_batch": fig["work_cpu"] / nb, "worker_blocked_per_batch": model.blocked / nb,
                         "worker_runq_per_batch": (fig["worker_runq"] / nb) if fig["worker_runq"] is not None else None,
                         "disk_bytes_per_s": fig["disk_bytes"] / T, "pin_memory_cpu": pin_cost,
                         "startup_seconds": fig["startup"], "other_load": fig["other_load"],
                         "loader_loop_cpu_per_batch": fig["loop_cpu"], "probe_cpu_per_batch": fig["probe_cpu"],
                         "no_workers": fig["no_workers"],
                         "steps": {n: {"cpu_per_sample": p[0] * k / (nb * per), "wall_per_sample":
                                       p[1] * k / (nb * per), "share": part_cpu[n] / total_part}
                                   for n, p in fig["parts"].items()}},
            "recommend": recommend,
            "whatif": {"plus_one_worker": model.rate(L.num_workers + 1, L.persistent_workers) / base * measured
                       if base > 0 else None,
                       "no_workers": model.predict(0, measured),
                       "plus_one_core": rep.get("whatif", {}).get("plus_one_core"),
                       "cache": _cache_whatif(L, rep, fig, model, measured)},
            "sentences": rep.get("text") or [],
            "spec": self.spec,
            "python_steps": self.python_steps,
            "notes": notes,
            "settings": {"num_workers": L.num_workers, "prefetch_factor": L.prefetch_factor if L.num_workers else None,
                         "persistent_workers": L.persistent_workers, "pin_memory": L.pin_memory,
                         "batch_size": _batch_size(L) if L.batch_sampler is not None else None},
        }

    def _need(self):
        if self._d is None:
            raise DiagnoseError("sluice.torch.diagnose: the report is not ready (the with block has not ended)")
        return self._d

    def to_dict(self):
        """The figures: bottleneck, bound, predicted, measured, recommend, whatif, spec (JSON-ready)."""
        return _json.loads(_json.dumps(self._need()))

    @property
    def recommended(self):
        """The recommended DataLoader settings as keyword arguments."""
        return {k: v["value"] for k, v in self._need()["recommend"].items()}

    def __str__(self):
        d = self._need()
        m = d["measured"]
        s = d["settings"]
        out = [f"sluice.torch.diagnose: {type(self.loader.dataset).__name__}, num_workers={s['num_workers']}, "
               f"batch_size={s['batch_size']}, over {m['seconds']:.1f} s",
               f"  measured: {_rate(m['batches_per_s'])} batches/s ({_rate(m['samples_per_s'])} samples/s); the main "
               f"process waited idle for batches {_pct(m['main_waiting'])} of the time" +
               (f", in your step {_pct(m['training_step'])}" if m["training_step"] is not None else ""),
               f"  bottleneck: {d['bottleneck']['words']}",
               f"  bound: {_rate(d['bound'] or 0)} batches/s under this machine's cores (limit: {d['limit']}" +
               (f"; other processes kept {m['other_load']:.1f} cores busy" if m["other_load"] >= 0.25 else "") + ")"]
        steps = sorted(m["steps"].items(), key=lambda kv: -kv[1]["share"])
        out.append("  where the CPU goes: " + ", ".join(f"{n} {_pct(v['share'])}" for n, v in steps[:6]
                                                        if v["share"] >= 0.005))
        w = d["whatif"]
        if w.get("plus_one_worker"):
            out.append(f"  what if: +1 worker {_rate(w['plus_one_worker'])} batches/s; +1 core: bound "
                       f"{_rate(w['plus_one_core'] or 0)}")
        c = w.get("cache")
        if c and c["batches_per_s"] and c["batches_per_s"] > 1.05 * m["batches_per_s"]:
            out.append(f"  what if: a cache after {c['after']} ({_size(c['bytes'])} for the dataset, "
                       f"{'within' if c['fits'] else 'over'} the memory budget of {_size(c['memory_budget'])}): "
                       f"epochs after the first at {_rate(c['batches_per_s'])} batches/s (a sluice `cache` op; a "
                       "DataLoader has none)")
        out.append("  recommend:")
        for k, v in d["recommend"].items():
            out.append(f"    {k}={v['value']!r} (now {v['was']!r}): {v['why']}")
        sp = d.get("sluice_spec")
        if sp is not None:
            out.append(f"  the same pipeline in sluice: predicted {sp['over_loader']:.2f}x ({_rate(sp['predicted'])} "
                       f"{sp['unit']}; report.spec, planned: report.to_dict()['sluice_spec']['spec'])")
        elif d["spec"] is not None:
            py = f"; Python steps: {', '.join(d['python_steps'])}" if d["python_steps"] else ""
            out.append(f"  the same pipeline in sluice ({len(d['spec']['ops'])} ops{py}): report.spec")
        for n in d["notes"]:
            out.append(f"  note: {n}")
        return "\n".join(out)

    def __repr__(self):
        if self._d is None:
            return "<sluice.torch.Report (not filled)>"
        return f"<sluice.torch.Report: {self._d['bottleneck']['words']}>"

    def save_html(self, path):
        """Writes the ``sluice report`` page of the loader's trace, with the diagnosis on top. Returns ``path``."""
        self._need()
        if self._html is None:
            res = _sluice._sluice.analyze_trace(_json.dumps(self.trace), cores=self.cores, memory=self.memory,
                                                only_autotune=True, no_cache=True, html=True,
                                                source="sluice.torch.diagnose")
            import html as _h
            box = ("<section style=\"border:1px solid #888;padding:0.5em 1em;margin:1em 0\"><h2>DataLoader diagnosis"
                   "</h2><pre>" + _h.escape(str(self)) + "</pre>")
            if self.spec is not None:
                box += "<h3>The same pipeline in sluice</h3><pre>" + _h.escape(_json.dumps(self.spec, indent=1)) + \
                       "</pre>"
            box += "</section>"
            page = res["html"]
            i = page.find("<body")
            j = page.find(">", i) + 1 if i >= 0 else 0
            self._html = page[:j] + box + page[j:]
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._html)
        return path

    def compare_spec(self, seconds=3.0):
        """Plans the translated spec (``Pipeline.optimize`` for ``seconds``: a trace, the planner) and returns its
        predicted rate beside the loader's measured one: {"predicted", "baseline", "bound", "unit", "over_loader",
        "spec" (the planned spec, runnable as written in this process)}; also kept in ``to_dict()["sluice_spec"]``."""
        p = self.pipeline()
        plan = p.optimize(seconds=seconds)
        measured = self._d["measured"]["batches_per_s"]
        out = {"predicted": plan["predicted"], "baseline": plan["baseline"], "bound": plan["bound"],
               "unit": plan["unit"], "over_loader": plan["predicted"] / measured if measured > 0 else None,
               "spec": plan["spec"]}
        self._d["sluice_spec"] = out
        return out

    def pipeline(self, **kw):
        """The translated spec as a sluice.Pipeline (its Python steps are registered in this process)."""
        if self._need()["spec"] is None:
            raise DiagnoseError("sluice.torch.diagnose: this loader has no sluice equivalent: " +
                                "; ".join(self._d["notes"]))
        return _sluice.Pipeline(self.spec, **kw)


def tuned(loader, report=None, seconds=5.0, **diagnose_kw):
    """A new DataLoader like ``loader`` (same dataset, sampler, collate) with the recommended num_workers,
    prefetch_factor, persistent_workers and pin_memory: those of ``report``, or of a ``diagnose`` run of ``seconds``
    now."""
    if report is None:
        report = diagnose(loader, seconds=seconds, **diagnose_kw)
    return _make_loader(_loader_args(loader), **report.recommended)


# ---------------------------------------------------------------- python -m sluice.torch diagnose SCRIPT.py

_USAGE = """usage: python -m sluice.torch diagnose [--seconds S] [--html PATH] [--json PATH] SCRIPT.py [ARGS...]

Runs SCRIPT.py as __main__; the first DataLoader it iterates is traced for S seconds (20) from its first batch,
with the script's own loop as the consumer; then the script is stopped and the diagnosis printed."""


def main(argv=None):
    import runpy
    args = list(_sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "diagnose":
        print(_USAGE, file=_sys.stderr)
        return 2
    args.pop(0)
    seconds, html, js = 20.0, None, None
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt in ("--seconds", "--html", "--json") and args:
            val = args.pop(0)
            if opt == "--seconds":
                seconds = float(val)
            elif opt == "--html":
                html = val
            else:
                js = val
        else:
            print(_USAGE, file=_sys.stderr)
            return 2
    if not args:
        print(_USAGE, file=_sys.stderr)
        return 2
    _check_seconds(seconds)
    script = args[0]
    state = {}
    orig = _DataLoader.__iter__

    def first_traced(loader):
        if "report" not in state and type(loader).__iter__ is first_traced:
            rep = state["report"] = Report(loader)
            rep._begin(deadline=seconds)
            return iter(loader)
        return orig(loader)

    _DataLoader.__iter__ = first_traced
    saved_argv = _sys.argv
    _sys.argv = args
    ok = False
    try:
        runpy.run_path(script, run_name="__main__")
        ok = True
    except _Stop:
        ok = True
    finally:  # the script's own error propagates after the tracing is undone
        _sys.argv = saved_argv
        _DataLoader.__iter__ = orig
        rep = state.get("report")
        if rep is not None and not ok:
            rep._finish(ok=False)
    if rep is None:
        print(f"sluice.torch diagnose: {script} iterated no DataLoader", file=_sys.stderr)
        return 1
    try:
        rep._finish(ok=True)
    except DiagnoseError as e:
        print(e, file=_sys.stderr)
        return 1
    print(rep)
    if html:
        rep.save_html(html)
    if js:
        with open(js, "w") as f:
            _json.dump(rep.to_dict(), f, indent=1)
    return 0
