"""sluice.torch.common: what the diagnosis's modules share: its error, the window's minimum, number formats."""

import sluice as _sluice


# Batches the window must hold for the planner to name a bottleneck (SL_PLAN_MIN_ELEMENTS): diagnose traces longer.
MIN_BATCHES = 32


class DiagnoseError(_sluice.Error):
    """The loader could not be traced (it yields nothing, or a setting cannot be copied)."""


def _pct(x):
    return f"{100 * x:.0f}%"


def _size(b):
    return f"{b / 1e9:.1f} GB" if b >= 1e9 else f"{b / 1e6:.1f} MB" if b >= 1e6 else f"{b / 1e3:.0f} kB"


def _rate(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"
