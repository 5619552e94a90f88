"""sluice.torch.diagnose and sluice.torch.tuned: a loader traced for a while into a Report; a loader with its
recommended settings."""

import math as _math
import time as _time

import sluice as _sluice

from .common import MIN_BATCHES
from .loader import _loader_args, _make_loader
from .report import Report
from .tracer import _Tracer


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


def tuned(loader, report=None, seconds=5.0, **diagnose_kw):
    """A new DataLoader like ``loader`` (same dataset, sampler, collate) with the recommended num_workers,
    prefetch_factor, persistent_workers and pin_memory: those of ``report``, or of a ``diagnose`` run of ``seconds``
    now."""
    if report is None:
        report = diagnose(loader, seconds=seconds, **diagnose_kw)
    return _make_loader(_loader_args(loader), **report.recommended)
