"""sluice.torch.model: the loader's rate under other settings, the cache what-if, the recommended settings."""

import math as _math

import torch as _torch
from torch.utils.data import IterableDataset as _IterableDataset

from .common import _pct, _rate


# The most worker processes recommended per core, however blocked they are (each holds a copy of the dataset).
MAX_WORKERS_PER_CORE = 4


# torchvision steps whose output depends only on their input: a cache after them serves later epochs.
_DETERMINISTIC = {"Resize", "CenterCrop", "ToTensor", "PILToTensor", "Normalize", "ConvertImageDtype", "Grayscale",
                  "Pad", "ToImageTensor", "ToImage", "ConvertDtype", "ToDtype", "ToPureTensor"}


class _Model:
    """The loader's rate from its stage costs per batch, for other settings: the workers' stage at min(workers,
    cores) over its cost, the main process (serial: the GIL) at one batch per its cost, all under the cores' CPU.
    Without workers the main process does the work but pickles and unpickles nothing and starts no worker;
    persistent workers start once, not every epoch."""

    def __init__(self, fig, W, avail, persistent=False, cores=0.0, other=0.0):
        nb, k, parts = fig["batches"], fig["k"], fig["parts"]
        self.avail = avail
        # Other processes' load on `cores`: the scheduler shares the cores among runnable threads, so n of the loader's
        # get about cores x n / (n + other) of them, more than what the others left idle when n grows (issue 48:
        # beside other load, 2 workers measured faster than none, which "the cores left: 1" priced the same)
        self.cores, self.other = cores, max(other, 0.0)
        self.blocked = max(fig["work_wall"] - fig["work_cpu"] - (fig["worker_runq"] or 0.0), 0.0)
        self.cw = (fig["work_cpu"] + self.blocked) / nb  # a worker is busy for its CPU and its blocked time
        self.cw_cpu = fig["work_cpu"] / nb
        self.main = (fig["transfer_cpu"] + (fig["pin_cpu"] or 0.0) + (fig["step_wall"] or 0.0)) / nb
        self.main_cpu = (fig["transfer_cpu"] + (fig["pin_cpu"] or 0.0) + (fig["step_cpu"] or 0.0)) / nb
        self.cpu = (fig["work_cpu"] + fig["transfer_cpu"] + (fig["pin_cpu"] or 0.0) + (fig["step_cpu"] or 0.0)) / nb
        self.startup = parts.get("worker start-up (each epoch)", [0.0])[0] * k / nb
        h = fig.get("handoff") if W == 0 else None
        if h:
            # Without workers the run shows no hand-off; the hand-off probe ran the loader with one worker: the main
            # thread's CPU taking a batch replaces the loop's own (unpickling it: 0.88 ms of a planted loader's
            # 8 ms batch, with the fd of each tensor passed over a socket), and the worker's CPU beyond the
            # batch's work is its loop and pickling, in every worker
            send0 = max(h["worker"] - fig["work_cpu"] / nb, 0.0)
            self.cw += send0
            self.cw_cpu += send0
            self.main += h["main"] - fig["transfer_cpu"] / nb
            self.main_cpu += h["main"] - fig["transfer_cpu"] / nb
            self.cpu += send0 + h["main"] - fig["transfer_cpu"] / nb
        send = parts.get("send to the main process", [0.0])[0] * k / nb
        p0 = fig.get("no_workers") if W > 0 else None
        self.W, self.persistent, self.probed = W, persistent, bool(p0)
        if p0:
            # The loader's own fetch without workers, measured in a forked child (_probe_no_workers): samples,
            # collate and the loader's loop, none of it slowed by pickling batches between them; its wait for a core
            # too, which the main thread would wait as well on a busy machine (the traced rate, which the other
            # settings scale, has it: without it, num_workers=0 was priced on an idle core beside load 15-20)
            self.cost0 = p0["cpu"] + p0["blocked"] + p0.get("runq", 0.0) + \
                ((fig["pin_cpu"] or 0.0) + (fig["step_wall"] or 0.0)) / nb
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
            return self.share(1) / (self.cost0 - saved) if self.cost0 > saved else inf
        drop = (self.startup if persistent else 0.0) + saved
        c, cc, a = self.cw - drop, self.cw_cpu - drop, self.cpu - drop
        # w workers each busy c a batch, their CPU on at most the cores left; blocked time overlaps across workers
        return min(w / c if c > 0 else inf, self.share(w) / cc if cc > 0 else inf,
                   1 / self.main if self.main > 0 else inf, self.fair(a, max(self.main_cpu, cc / w)))

    def fair(self, a, busiest):
        """Batches/s the cores give the loader's threads, `a` CPU a batch in all, the busiest thread `busiest` of it,
        beside other load. Linux's fair scheduler fills the cores level: every runnable thread gets the same share
        unless it needs less. At rate r each of the other load's threads (its cores' worth, always runnable) takes
        as much as the loader's busiest thread needs, r x busiest, so r x (a + other x busiest) <= cores. A heavy
        main thread (one thread, however many workers) so bounds the rate, and a light one takes no share from the
        workers: beside one hog on 2 cores, 3 workers measured 1.14-1.25x two where counting the main process as a
        runnable thread (4/5 of the cores against 3/4) gave 1.07. Alone: the cores over the CPU a batch."""
        if a <= 0:
            return float("inf")
        if self.other > 0 and self.cores > 0:  # and at least the cores the other load leaves idle
            return max(self.cores / (a + self.other * busiest), self.avail / a)
        return self.avail / a

    def share(self, n, cap=True):
        """The cores `n` busy threads of the loader get: those other load leaves, or their fair share of all (with
        `cap`, at most n: the total's bound leaves that to the stages' own)."""
        got = self.avail
        if self.other > 0 and self.cores > 0:
            got = max(got, self.cores * n / (n + self.other))
        return min(n, got) if cap else got


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


# Beside other load a worker more is proposed when the model gives it this much more: the scheduler shares the cores
# among runnable threads, so each worker wins a share, but each is a process with a copy of the dataset and the share
# it wins shrinks with every one (2 to 3 workers beside one busy process on 2 cores: 4/3 to 3/2 of the cores). The
# fair share errs low: beside one hog on 2 cores a third worker measured 1.14-1.25x two (four loaders) where the model
# gave 1.07-1.13, so at 1.10 two of them kept 2 workers, 0.87 of the grid's best.
MORE_WORKERS_GAIN = 1.05
# Other processes' load (cores' worth, over the window) from which the machine counts as busy: the report names it,
# and the check also measures a worker more than the model's pick. Below it, a quiet machine's own noise.
BUSY_OTHER_LOAD = 0.25


def _beside_load(model, w, most, measured):
    """`w` workers, or more up to `most` while each more is predicted MORE_WORKERS_GAIN faster beside other load (the
    planner, budgeting the cores other load leaves, does not see the share more threads win: beside a CPU hog on 2
    cores the grid's best was 3 workers, 1.14-1.27x the 2 it proposed, for four planted loaders)."""
    if w <= 0 or model.other <= 0:
        return w
    best = model.predict(w, measured)
    while w < most:
        r = model.predict(w + 1, measured)
        if not r > MORE_WORKERS_GAIN * best:
            break
        w, best = w + 1, r
    return w


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
    most = max(W, MAX_WORKERS_PER_CORE * _math.ceil(rep["budget"]["cores"]))
    rec_w = _beside_load(model, rec_w, most, measured)
    base = model.rate(W, L.persistent_workers)
    gain = model.predict(rec_w, measured) / measured if measured > 0 else 1.0
    pred = f"predicted {_rate(measured * gain)} batches/s ({gain:.2f}x)"
    out = {"num_workers": {"value": rec_w, "was": W, "predicted": measured * gain,
                           "why": (f"keep {W}: more workers would not raise the rate" if rec_w == W else
                                   f"0: without workers no batch is pickled; {pred}" if rec_w == 0 else
                                   f"{rec_w} worker{'s' if rec_w > 1 else ''}: {pred}" if rec_w > W else
                                   f"{rec_w} worker{'s keep' if rec_w > 1 else ' keeps'} up: {pred} with fewer "
                                   "processes")}}
    # Beside other load the check also measures a worker more than the model's pick (the share of the cores a
    # worker wins is within the noise of the model's 5% steps: beside one hog on 2 cores the model's 3 workers
    # measured 1.05x two, the grid's 4 1.16x; imagenet, bench/torch_diagnose.py): the faster of the two that
    # measures faster than the settings as given is recommended (check.choose).
    if model.other >= BUSY_OTHER_LOAD and 0 < rec_w < most and rec_w >= W:
        out["num_workers"]["next"] = {"value": rec_w + 1, "predicted": model.predict(rec_w + 1, measured)}
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
