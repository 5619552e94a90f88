"""sluice.torch.check: what diagnose recommends, measured before it is said. The loader with the model's proposed
settings and with the settings as given run alternately, a few seconds each, from this process (their workers are
its children, as the user's loader's are; a proposal without workers for a loader with workers runs in a forked
child, so that the user's process never runs the dataset); the translated spec's planned pipeline runs in the same
rounds. A proposal is recommended only when it measured faster by more than MIN_GAIN in every round."""

import time as _time

import torch as _torch

import sluice as _sluice

from . import probe as _probe
from .loader import _loader_args, _make_loader, _stop_workers

# A change predicted or measured at this ratio of the settings as given, or less, is not recommended: on a shared
# machine two runs of the same settings differ by that much.
MIN_GAIN = 1.05
# Batches a run of the check counts at least (it runs up to twice its time for them); a comparison of runs with
# fewer recommends nothing.
MIN_RUN_BATCHES = 3
# Alternating rounds of the check (each runs every contender once; the order flips each round).
ROUNDS = 2
# A loader's run counts from this long after its first batch: worker processes started beside other load deliver
# their first batches over that time, not at once. Counting from the first batch, 4 workers of the imagenet loader
# beside a CPU hog measured 6.44 batches/s (median of 3 runs of 1.68 s) and 7.80 from 0.5 s after it (2 workers:
# 6.06 and 5.96): the check said the model's 3 workers were 1.03x the 2 as given where the grid's 5 s runs, which
# count from 0.5 s, measured 1.11x.
WARMUP = 0.5
# The settings the check compares (what tuned() sets).
SETTINGS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")


def settings_of(loader):
    """The settings of `loader` that tuned() sets, as diagnose compares them."""
    w = loader.num_workers
    return {"num_workers": w, "prefetch_factor": loader.prefetch_factor if w else None,
            "persistent_workers": bool(loader.persistent_workers) if w else False,
            "pin_memory": bool(loader.pin_memory)}


def applied(given, proposal):
    """`given` with the values of `proposal` (a dict of settings) over it, normalised as settings_of() gives them."""
    s = dict(given, **proposal)
    if not s["num_workers"]:
        s["prefetch_factor"], s["persistent_workers"] = None, False
    return s


def words(s):
    return ", ".join(f"{k}={s[k]!r}" for k in SETTINGS if not (k == "prefetch_factor" and s[k] is None))


def _count(start, seconds, warmup=0.0, skip=0, least=MIN_RUN_BATCHES):
    """(batches, seconds) of the iterators `start()` makes (a new one when one ends: a new epoch) from the first
    batch after `warmup` seconds and `skip` batches (those made alongside the first) for
    `seconds`, or longer, up to twice that, until `least` were counted."""
    its = [start()]
    n, t0, first, seen = 0, None, None, 0
    while True:
        try:
            next(its[0])
        except StopIteration:
            its[0] = start()
            continue
        now = _time.monotonic()
        seen += 1
        if t0 is None:
            first = first or now
            if now - first >= warmup and seen > skip:
                t0 = now
            continue
        n += 1
        if now - t0 >= seconds and (n >= least or now - t0 >= 2 * seconds):
            return n, now - t0


def measure_loader(loader, seconds, warmup=0.0):
    """(batches, seconds) of `loader` over `seconds` after its first batch, `warmup` more and the first batch of
    each other worker (made at the same time as the first: they arrive at once, and would flatter a short run); a
    new epoch's start-up is inside, as a training loop meets it. Its workers are stopped before
    this returns, also on an error or Ctrl-C."""
    its = [None]

    def start():
        its[0] = iter(loader)
        return its[0]
    try:
        return _count(start, seconds, warmup, max(loader.num_workers - 1, 0))
    finally:
        _stop_workers(loader, its[0])


def measure_pipeline(p, seconds):
    """(elements, seconds) of sluice.Pipeline `p` over `seconds` after its first element, runs restarting as epochs."""
    runs = []

    def start():
        if runs:
            runs[-1].close()
        runs.append(iter(p))
        return runs[-1]
    try:
        return _count(start, seconds)
    finally:
        if runs:
            runs[-1].close()


def run_rounds(contenders, seconds, rounds=ROUNDS, progress=None):
    """Each contender (name -> a function of `seconds` giving (batches, seconds)) once per round, the order
    reversed every other round. Returns ({name: [rate of each round]}, {name: why it gave no figure}, {name:
    [batches of each round]}): a contender
    that raised CheckError or sluice.Error is dropped from the rounds after (the loader's own errors propagate)."""
    names = list(contenders)
    out, failed, counts = {n: [] for n in names}, {}, {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            if n in failed:
                continue
            if progress:
                progress(f"round {r + 1} of {rounds}: the loader {n} for {seconds:.3g} s" if n != "sluice" else
                         f"round {r + 1} of {rounds}: the same pipeline in sluice for {seconds:.3g} s")
            try:
                b, t = contenders[n](seconds)
            except (CheckError, _sluice.Error) as e:
                failed[n] = str(e)
                out[n] = None
                continue
            out[n].append(b / t if t > 0 else 0.0)
            counts[n].append(b)
    return out, failed, counts


def total(rates):
    return sum(rates) / len(rates) if rates else 0.0


def decide(given, proposal, predicted_gain, tuned_over=None):
    """Whether the proposal is worth measuring: (True, None) or (False, why not, in words)."""
    if proposal == given:
        return False, f"these are the settings the model proposes itself (predicted {predicted_gain:.2f}x)"
    if tuned_over is not None and proposal == tuned_over["settings"]:
        return False, (f"tuned() chose these settings over the proposal ({words(proposal)}), which measured "
                       f"{tuned_over['ratio']:.2f}x of them")
    if predicted_gain <= MIN_GAIN:
        return False, (f"the model's best settings ({words(proposal)}) predict {predicted_gain:.2f}x the settings as "
                       f"given (at most {MIN_GAIN:.2f}x is within the noise of a shared machine)")
    return True, None


def verdict(rates_given, rates_prop, predicted_gain, seconds, rounds, fewest=MIN_RUN_BATCHES,
            least=MIN_RUN_BATCHES):
    """(faster, ratio, why): whether the proposal measured faster than the settings as given by more than MIN_GAIN
    in every round (`fewest`: the fewest batches a run counted; fewer than `least` tell nothing); `why` says it
    in words with both figures."""
    g, p = total(rates_given), total(rates_prop)
    ratio = p / g if g > 0 else float("inf")
    every = all(b > MIN_GAIN * a for a, b in zip(rates_given, rates_prop))
    how = (f"{_fmt(p)} against {_fmt(g)} batches/s as given, {rounds} alternating round{'s' if rounds > 1 else ''} "
           f"of {seconds:.3g} s each; predicted {predicted_gain:.2f}x")
    if fewest < least:
        return False, ratio, (f"measured {ratio:.2f}x, but a run of the check counted only {fewest} batch"
                              f"{'es' if fewest != 1 else ''}, too few to tell ({how}): a longer check_seconds "
                              "can")
    if ratio > MIN_GAIN and every:
        return True, ratio, f"measured {ratio:.2f}x: {how}"
    if ratio > MIN_GAIN:
        return False, ratio, (f"measured {ratio:.2f}x over the rounds but not more than {MIN_GAIN:.2f}x in each of "
                              f"them ({how})")
    return False, ratio, f"measured {ratio:.2f}x the settings as given ({how})"


def choose(verdicts):
    """Of the contenders' verdicts ({name: (faster, ratio, why)}, "proposed" first), the name of the one to
    recommend: the highest ratio among those measured faster; None when none was."""
    won = [(v[1], n) for n, v in verdicts.items() if v[0]]
    return max(won)[1] if won else None


def _fmt(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def loader_contender(loader, settings, batch_wall=0.0):
    """A function of `seconds` measuring a loader like `loader` with `settings` (a dict from settings_of()). Without
    workers where `loader` has some, it runs in a forked child (as the no-workers probe does): the user's process
    never runs the dataset itself, and a dataset that cannot run there (it raises, or hangs: killed at the timeout,
    after `seconds` and three `batch_wall`s more) gives no figure. Each function raises CheckError then."""
    kw = dict(_loader_args(loader), **{k: v for k, v in settings.items() if v is not None})
    if kw["num_workers"] > 0 and kw.get("prefetch_factor") is None:
        kw["prefetch_factor"] = 2  # torch's default with workers
    if kw["num_workers"] > 0 or loader.num_workers == 0:
        return lambda seconds: measure_loader(_make_loader(kw), seconds, WARMUP)

    def in_child(seconds):
        def fetch():
            _torch.set_num_threads(1)  # torch's thread pool is not the parent's after fork
            return list(measure_loader(_make_loader(kw, pin_memory=False), seconds, WARMUP))
        got, why = _probe._in_child(fetch, _probe.PROBE_TIMEOUT + 2 * seconds + 3 * batch_wall)
        if got is None:
            raise CheckError(f"without workers (in a child process, as the no-workers probe runs): {why}")
        return got[0], got[1]
    return in_child


class CheckError(Exception):
    """A contender of the check could not be measured."""


def pipeline_contender(p):
    return lambda seconds: measure_pipeline(p, seconds)
