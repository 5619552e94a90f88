"""sluice: fast ML input pipelines that find and remove their own bottlenecks, from Python.

    import sluice
    for batch in sluice.Pipeline("examples/imagenet.json"):
        images, labels = batch["image/encoded"], batch["image/class/label"]   # numpy arrays, no copy

A pipeline is built from a JSON spec (docs/spec.md): a path, a JSON string or a dict. Iterating yields one dict
per element: numeric components as numpy arrays that borrow the engine's buffers (``arr.base`` is a
``sluice._sluice.Buf``; the array stays valid after the pipeline is gone), byte strings as ``bytes`` (rank 0) or
lists of ``bytes``. The engine runs on its own threads with the GIL released; Ctrl-C cancels the run.
See docs/python.md.
"""

import atexit as _atexit
import json as _json
import os as _os
import re as _re

from . import _sluice
from ._sluice import DataError, Error, SpecError, StoreError

__all__ = ["Pipeline", "Error", "SpecError", "DataError", "StoreError", "register_fn", "functions", "__version__"]

__version__ = _sluice.version()

# The library's messages name where an error is in a fixed form ("<origin>: ops[1].args.x: ...", "ops[2] (map):
# element 5 (FILE, line 7): ...", "ops[1] (tfrecord): FILE: record 3 at byte 96: ..."); these attributes read it
# back, so that code need not parse str(e). Each is None when the message does not name it.
_SPEC_AT = _re.compile(r"^(?:(?P<origin>[^:]*?): )?(?P<path>(?:ops|name|seed|comment)(?:\[\d+\]|\.[A-Za-z_]\w*)*)(?::| \()")
_OP_AT = _re.compile(r"(?:^|: )(?P<op>ops\[\d+\](?:\.source\[\d+\])*)")
_ELEMENT = _re.compile(r"\belement (\d+)")
_LINE = _re.compile(r"\((?P<file>[^()]+?), line (?P<line>\d+)\)")
_RECORD = _re.compile(r"(?:^|: )(?P<file>[^:]+?): record (?P<record>\d+) at byte")


def _match(rx, text, group, conv=str):
    m = rx.search(text)
    return conv(m.group(group)) if m and m.group(group) is not None else None


SpecError.path = property(lambda self: _match(_SPEC_AT, str(self), "path"),
                          doc="The JSON path the message names (``ops[1].args.componnet``), or None.")
SpecError.origin = property(lambda self: _match(_SPEC_AT, str(self), "origin"),
                            doc="The spec file (or ``<dict>``, ``<spec>``) the message names, or None.")
DataError.op = property(lambda self: _match(_OP_AT, str(self), "op"),
                        doc="The op the error happened in (``ops[2]``), or None.")
DataError.element = property(lambda self: _match(_ELEMENT, str(self), 1, int),
                             doc="The element's index in the op's input, or None.")
DataError.file = property(lambda self: _match(_LINE, str(self), "file") or _match(_RECORD, str(self), "file"),
                          doc="The data file the bad record or line is in, or None.")
DataError.line = property(lambda self: _match(_LINE, str(self), "line", int),
                          doc="The line of a text or CSV file (1-based), or None.")
DataError.record = property(lambda self: _match(_RECORD, str(self), "record", int),
                            doc="The TFRecord record's index in its file, or None.")


def _spec_text(spec):
    """(text, origin, is_path) for a spec given as a dict, a JSON string or a path."""
    if isinstance(spec, dict):
        return _json.dumps(spec), "<dict>", False
    if isinstance(spec, (bytes, bytearray)):
        spec = spec.decode()
    if isinstance(spec, _os.PathLike):
        return _os.fspath(spec), None, True
    if not isinstance(spec, str):
        raise TypeError(f"Pipeline: spec must be a path, a JSON string or a dict, not {type(spec).__name__}")
    if spec.lstrip().startswith(("{", "[")):  # JSON text (an array is refused as a spec by the parser, naming it)
        return spec, "<spec>", False
    return spec, None, True


def _tune_args(tune):
    """(on, interval, drift) for the ``tune`` argument: a bool, or a dict with ``interval`` and ``drift``."""
    if isinstance(tune, dict):
        unknown = set(tune) - {"interval", "drift"}
        if unknown:
            raise ValueError(f"Pipeline: tune: unknown option(s) {sorted(unknown)} (known: interval, drift)")
        return True, float(tune.get("interval") or 0), float(tune.get("drift") or 0)
    if not isinstance(tune, bool):
        raise TypeError(f"Pipeline: tune must be a bool or a dict, not {type(tune).__name__}")
    return tune, 0.0, 0.0


class Pipeline(_sluice.Pipeline):
    """A pipeline built from a spec: a path, a JSON string or a dict. Iterate it for one run (each ``iter()``
    starts an independent run; runs of one pipeline may go on at once). Raises SpecError with the library's
    message (naming the JSON path) for a bad spec.

    ``tune=True`` runs the online tuner (``sluice run --tuner sluice``) while the pipeline is iterated: it re-solves
    the planner's model from the live counters and sets the ``"autotune"`` knobs of the running pipeline; see
    ``tuner_changes()``; before that, decode_jpeg followed by random_resized_crop, center_crop or resize is fused
    into one op that decodes only the window it needs, as ``sluice optimize`` fuses them (``tuner_fused()`` says
    what was). A dict
    sets its options: ``{"interval": seconds between looks (1), "drift": the cost
    change that makes it solve again (0.2)}``."""

    def __init__(self, spec, tune=False):
        text, origin, is_path = _spec_text(spec)
        on, interval, drift = _tune_args(tune)
        self._path = text if is_path else None
        super().__init__(text, origin, is_path, on, interval, drift)

    def tuner_changes(self):
        """The online tuner's knob changes so far (``tune=True``), oldest first, over every run: one dict each
        with ``t`` (seconds since that tuner started), ``op`` (its path), ``kind``, ``fn``, ``knob``
        (``"parallelism"`` or ``"buffer"``), ``from``, ``to``, ``reason`` (the bottleneck sentence and the predicted
        gain) and ``run`` (which tuned stretch: the tuner runs while any iterator is live, a new one after)."""
        out = []
        for run, text in enumerate(self._tuner_logs()):
            for change in _json.loads(text):
                change["run"] = run
                out.append(change)
        return out

    def validate(self):
        """Builds the spec again from its normalised JSON (every op, knob and function checked, input files
        listed again); raises SpecError when it no longer builds. Returns the number of ops."""
        _sluice.Pipeline(self.to_json(), "<validate>", False)
        return len(self.stats())

    def optimize(self, seconds=2.0, cores=0, consumer_cores=0, memory=0, measure=0):
        """Traces the pipeline for ``seconds``, plans its ``"autotune"`` knobs for ``cores`` (0: the machine's)
        minus ``consumer_cores`` (what the training loop needs) within ``memory`` bytes (0: half of what is
        available), and rebuilds the pipeline in place with the plan. ``measure`` > 0 runs the tuned pipeline
        that long to measure it. Returns the plan's summary: baseline, predicted, measured and bound
        throughput (elements/s), rounds, and the tuned spec (``spec``)."""
        summary = self._optimize(seconds=seconds, cores=cores, consumer_cores=consumer_cores, memory=memory,
                                 measure=measure)
        summary["spec"] = _json.loads(self.to_json())
        return summary

    def report(self, path, seconds=2.0):
        """Traces the pipeline for ``seconds`` and writes the HTML report of the trace (what ``sluice report``
        writes: op graph, rates, bottleneck, bound, what-ifs) to ``path``. Returns ``path``."""
        html = self._report_html(seconds=seconds)
        with open(path, "w", encoding="utf-8") as f:
            f.write(html)
        return path

    def spec(self):
        """The normalised spec as a dict."""
        return _json.loads(self.to_json())

    def __repr__(self):
        try:
            return f"sluice.Pipeline({self.name!r})"
        except Error:
            return "sluice.Pipeline(<not built>)"


def register_fn(name, fn, random=False, filter=False):
    """Registers the Python function ``fn(element_dict) -> element_dict`` as map function ``name``, usable in
    specs like any function (``{"op": "map", "fn": name}``). With ``filter=True`` it is a predicate for
    ``filter`` (returns true to keep). ``random=True`` says its output depends on randomness (then it takes no
    cache above it). The input arrays are read-only views of the engine's buffers; return new arrays (or the
    same ones, passed on without a copy), ``bytes``, ``int`` or ``float``. Python functions run under the GIL:
    together they get at most one core, whatever the op's parallelism. An exception inside ``fn`` fails the run
    at that element: iteration raises sluice.Error whose message carries the traceback, with the original
    exception as ``__cause__``."""
    _sluice.register_fn(name, fn, random=random, filter=filter)


def functions():
    """Names of the registered functions (built-in and registered from Python)."""
    return _sluice.fn_names()


# No engine thread may wait for the GIL while the interpreter finalises: stop every run first.
_atexit.register(_sluice.close_all)
