"""sluice.torch.diagnose and sluice.torch.tuned: a loader traced for a while into a Report; a loader with its
recommended settings."""

import math as _math
import sys as _sys
import time as _time

from . import check as _ck
from . import probe as _probe
from .loader import _loader_args, _make_loader
from .report import Report, default_check_seconds, default_spec_seconds
from .tracer import _Tracer


def _check_seconds(seconds):
    if not (isinstance(seconds, (int, float)) and seconds > 0 and _math.isfinite(seconds)):
        raise ValueError(f"sluice.torch.diagnose: seconds must be a positive number, not {seconds!r}")


def _stderr(msg):
    print(f"sluice.torch.diagnose: {msg}", file=_sys.stderr, flush=True)


def diagnose(loader, seconds=20.0, cores=0, memory=0, spec_seconds=None, check_seconds=None, quiet=False,
             progress=None):
    """Traces ``loader`` (a torch DataLoader) for ``seconds`` after its first batch and returns a Report: the
    bottleneck, the bound, what-ifs and the recommended settings (``print(report)``, ``report.to_dict()``,
    ``report.save_html(path)``). The loader itself is not changed: a copy with timed steps runs, yielding what the
    loader yields, and its workers are stopped before this returns (also on an error or Ctrl-C).

    What the model proposes is then measured: the loader with the proposed settings and as given run alternately,
    ``check_seconds`` each (default: a sixth of ``seconds``, 0.5 to 3 s), 2 rounds, and the proposal is recommended
    only when it measured faster in both and by more than 5% (``report.recommended`` is empty otherwise, and the
    report says "no change helps here" and why). When every step has a sluice equivalent, the translated spec is
    planned for ``spec_seconds`` (default: a quarter of ``seconds``, 1 to 5 s; 0: not) and measured in the same
    rounds. What it will take is said on stderr first, and each phase as it starts (``quiet=True``: nothing;
    ``progress``: a function given each line instead).

    ``seconds=None`` traces the caller's own loop instead: ``with sluice.torch.diagnose(loader, None) as report:``
    around the training loop (``for batch in loader: ...``), and the report is filled (and checked) when the block
    ends; the time between batches is the training step (the consumer). ``cores`` and ``memory`` set the planner's
    budget (0: this machine's cores and half of the memory available)."""
    if progress is None and not quiet:
        progress = _stderr
    elif quiet:
        progress = None
    report = Report(loader, cores=cores, memory=memory, spec_seconds=spec_seconds, check_seconds=check_seconds,
                    progress=progress)
    if seconds is None:
        return report
    _check_seconds(seconds)
    if progress is not None:
        progress(_plan_words(loader, seconds, spec_seconds, check_seconds))
    tr = _Tracer(loader)
    try:
        deadline = None
        while True:
            tr.next()
            if deadline is None:
                deadline = _time.monotonic() + seconds
            # The window ends at its time: a window of few batches still names a step that dominates, and what is
            # recommended is measured afterwards (the planner's bound is what few batches make rough).
            if _time.monotonic() >= deadline:
                break
        tr.end()
    finally:
        tr.close()
    try:
        report._fill(tr, consumer=False)
    finally:
        tr.release()
    report._verify()
    return report


def _plan_words(loader, seconds, spec_seconds, check_seconds):
    """What diagnose will do, and for how long at most (the loader's start-ups aside), in words."""
    spec_s = default_spec_seconds(seconds) if spec_seconds is None else spec_seconds
    check_s = default_check_seconds(seconds) if check_seconds is None else check_seconds
    # contenders: as given, the proposal, beside other load a worker more, the spec in sluice; a run lasts up to
    # twice check_s to count its batches, a loader's after a warm-up
    runs = _ck.ROUNDS * 4 * 2 * check_s + _ck.ROUNDS * 3 * _ck.WARMUP
    # the no-workers probe: 0.6 s of fetch and its gaps, the fork; the hand-off probe: a run with one worker
    probe = 1.5 if loader.num_workers > 0 else _probe.HANDOFF_MAX_SECONDS
    most = seconds + probe + 2 * spec_s + runs
    parts = [f"tracing the loader for {seconds:g} s after its first batch"]
    if loader.num_workers > 0:
        parts.append("pricing num_workers=0 in a child process (about 1 s)")
    else:
        parts.append(f"pricing the hand-off of batches from a worker with one worker "
                     f"({_probe.HANDOFF_SECONDS:g}-{_probe.HANDOFF_MAX_SECONDS:g} s)")
    if spec_s > 0:
        parts.append(f"planning the same pipeline in sluice when it translates ({2 * spec_s:.3g} s at most)")
    if check_s > 0:
        parts.append(f"measuring what it proposes (beside other load, and a worker more) against the settings as "
                     f"given ({_ck.ROUNDS} rounds of "
                     f"{check_s:.3g} s runs, {runs:.3g} s at most)")
    return "; ".join(parts) + f": {most:.0f} s at most, plus the loader's start-ups"


def tuned(loader, report=None, seconds=5.0, **diagnose_kw):
    """A new DataLoader like ``loader`` (same dataset, sampler, collate) with the recommended num_workers,
    prefetch_factor, persistent_workers and pin_memory: those of ``report``, or of a ``diagnose`` run of ``seconds``
    now; the settings as given when no change measured faster. A loader diagnosed again after this is not sent
    back to the settings it was tuned from: those measured slower."""
    if report is None:
        report = diagnose(loader, seconds=seconds, **diagnose_kw)
    out = _make_loader(_loader_args(loader), **report.recommended)
    c = report.to_dict().get("check") or {}
    if report.recommended and c.get("measured_gain"):
        out._sluice_tuned = {"settings": _ck.settings_of(loader), "ratio": 1 / c["measured_gain"]}
    elif getattr(loader, "_sluice_tuned", None) is not None:  # unchanged: what it was tuned from stays slower
        out._sluice_tuned = loader._sluice_tuned
    return out
