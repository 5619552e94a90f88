"""python -m sluice.torch diagnose SCRIPT.py: the first DataLoader the script iterates, traced."""

import json as _json
import sys as _sys

from torch.utils.data import DataLoader as _DataLoader

from .common import DiagnoseError
from .diagnosis import _check_seconds
from .report import Report
from .tracer import _Stop


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
