"""sluice: fast ML input pipelines that find and remove their own bottlenecks, from Python.

    import sluice
    for batch in sluice.Pipeline("examples/imagenet.json"):
        images, labels = batch["image"], batch["image/class/label"]   # numpy arrays, no copy

A pipeline is built from a JSON spec (docs/spec.md): a path, a JSON string or a dict. Iterating yields one dict
per element: numeric components as numpy arrays that borrow the engine's buffers (``arr.base`` is a
``sluice._sluice.Buf``; the array stays valid after the pipeline is gone), byte strings as ``bytes`` (rank 0) or
lists of ``bytes``, except names (``filename``, ``__key__``, ``__url__``) and a tar's text members (``txt``), which
are ``str`` (docs/python.md). The engine runs on its own threads with the GIL released; Ctrl-C cancels the run.
See docs/python.md.
"""

import atexit as _atexit
import json as _json
import os as _os
import re as _re
import sys as _sys
import warnings as _warnings

from . import _sluice
from ._sluice import DataError, Error, SpecError, StoreError

__all__ = ["Pipeline", "Error", "SpecError", "DataError", "StoreError", "SkipWarning", "register_fn", "functions",
           "convert", "__version__"]

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


class SkipWarning(UserWarning):
    """Elements were skipped in a run (a map's ``"on_error": "skip"``, a reader's ``"on_corrupt": "skip"``): warned
    once per run and op, with the count and the first reasons. ``warnings.simplefilter("ignore", sluice.SkipWarning)``
    silences it; ``it.skipped`` holds the same after the run."""


# Every run's skips are told, not only the first run's (Python's default shows a repeated text once); a filter
# the user sets comes first.
_warnings.filterwarnings("always", category=SkipWarning, append=True)

# The counters of stats() that add up over a run (the rest are levels or settings): a run's own are the difference.
_RUN_SUMS = ("elements_out", "elements_in", "bytes_out", "cpu_seconds", "wall_seconds", "wait_seconds", "disk_bytes",
             "skipped", "errors_skipped")


# Frames of these modules are ours or the loader's: a SkipWarning points at the first frame outside them, the
# user's loop (over a Pipeline, a sluice.torch.Dataset or a DataLoader of one).
_INNER = ("sluice", "torch.utils.data", "torchdata")


def _inner(name):
    return any(name == m or name.startswith(m + ".") for m in _INNER)


def _caller_level():
    """warnings.warn's stacklevel for the first frame outside _INNER, counted from the caller of this function."""
    f, level = _sys._getframe(2), 2
    while f is not None and _inner(f.f_globals.get("__name__", "")):
        f, level = f.f_back, level + 1
    return level


class _Run:
    """One run of a pipeline (what ``iter(pipeline)`` returns): the engine's iterator, plus what the run skipped.
    ``close()`` and ``cancel()`` are the engine iterator's."""

    __slots__ = ("_it", "_p", "_epoch", "_stats0", "_skips0", "skipped")

    def __init__(self, p, epoch, state=None):
        self._p, self._epoch = p, epoch
        # the counters before the run starts: its workers begin at once
        self._stats0 = p.stats()
        self._skips0 = [_reason_counts(p, i) if st["skipped"] else {} for i, st in enumerate(self._stats0)]
        self.skipped = None  # after the run: {op path: {"count", "errors", "reasons": [...]}} (ops that skipped)
        self._it = _sluice.Pipeline.__iter__(p) if state is None else p._iter_at(state)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._it)
        except StopIteration:
            self._finish()
            raise

    def close(self):
        self._it.close()
        self._finish()

    def cancel(self):
        self._it.cancel()

    def state(self):
        """The run's position as bytes: what this run has handed out so far (not what its workers made ahead).
        ``pipeline.iter(state=s)`` continues from it, in this process or another, exactly: the same elements in the
        same order for a spec with a seed (docs/state.md). Small (refs to records, not data) and fast."""
        return self._it.state()

    def position(self):
        """Elements handed out so far (a run resumed from a state counts on from the state's)."""
        return self._it.position()

    def keep_state(self):
        """Says states will be asked for: every ``state()`` is then quick, the first included (without it the
        first may wait for the element being made). Costs microseconds per element of a millisecond or more."""
        self._it.keep_state()

    def stats(self):
        """The pipeline's per-op counters for this run alone (``Pipeline.stats()`` sums every run)."""
        out = self._p.stats()
        for now, was in zip(out, self._stats0):
            for k in _RUN_SUMS:
                now[k] -= was[k]
        return out

    def _finish(self):
        if self.skipped is not None:
            return
        self.skipped = {}
        for i, st in enumerate(self.stats()):
            if st["skipped"] <= 0:
                continue
            reasons = []
            for r in _json.loads(self._p._skips(i)):
                r["count"] -= self._skips0[i].get(r["reason"], 0)
                if r["count"] > 0:
                    reasons.append(r)
            self.skipped[st["path"]] = {"count": st["skipped"], "errors": st["errors_skipped"], "reasons": reasons}
            # each reason's latest message: this run's (its count grew in it), with this run's element index and
            # the file or shard and key as they are
            told = "; ".join(f'{r["count"]} x {r.get("last") or r["first"] or "(no message kept)"}'
                             for r in reasons[:3])
            more = f"; and {len(reasons) - 3} more reasons" if len(reasons) > 3 else ""
            _warnings.warn(SkipWarning(f"{st['path']} ({st['op']} {st['label']}) skipped {st['skipped']} element(s) "
                                       f"in run {self._epoch}: {told or 'no reason recorded'}{more}"),
                           stacklevel=_caller_level())


# The online tuner's reasons (plan_tune.c) start with what it did, in the planner's terms; each gets a plain
# sentence, and the rest (the bottleneck, the prediction) follows as it is.
_PLAIN = [
    (_re.compile(r"^first solve"), "first plan, from the costs measured while the pipeline ran"),
    (_re.compile(r"^drift: a stage's CPU/element moved by (\d+)% of the total \(two windows\)"),
     r"the costs changed (an op's CPU time per element moved by \1% of the pipeline's, twice in a row): planned again"),
    (_re.compile(r"^trial: every tunable op at parallelism 1 and no prefetch ahead \(worker threads must earn their "
                 r"hand-offs\)"),
     "trying every tunable op on one thread, with no prefetch: passing elements between threads costs time, so "
     "workers stay only where they are faster"),
    (_re.compile(r"^trial: ([\d.]+) elem/s at parallelism 1 against ([\d.]+) with workers; solved on its window "
                 r"\(sequential costs, hand-offs priced\)"),
     r"after the one-thread trial (\1 elements/s, against \2 with workers): planned again from its measurements"),
    (_re.compile(r"^trial reverted: ([\d.]+) elem/s at parallelism 1 against ([\d.]+) with workers"),
     r"the one-thread trial was slower (\1 elements/s, against \2 with workers): the workers are back"),
    (_re.compile(r"^reverted: ([\d.]+) elem/s measured after the change \((.*?)\) against ([\d.]+) before it"),
     r"undone: the pipeline ran slower after the change (\1 elements/s, against \3 before it)"),
    (_re.compile(r"^cache after"), "keeps one epoch in memory and replays it: cache after"),
]


def _plain_reason(reason):
    for rx, words in _PLAIN:
        m = rx.search(reason)
        if m:
            return m.expand(words) + reason[m.end():]
    return reason


def _examples_per_element(spec):
    """Examples in one output element: the product of the top-level batch sizes (1 without a batch op; None when
    a batch's size varies, as bucket_by_sequence_length's does)."""
    per = 1
    for op in spec.get("ops", []):
        if op.get("op") in ("batch", "padded_batch"):
            per *= int(op.get("size", 1))
        elif op.get("op") == "bucket_by_sequence_length":
            return None
    return per


def _reason_counts(p, i):
    return {r["reason"]: r["count"] for r in _json.loads(p._skips(i))}


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

    ``tune=True`` runs the online tuner (``sluice run --tuner sluice``) from the first run on, one tuner from epoch
    to epoch until the pipeline is freed or rebuilt by ``optimize()``: it re-solves the planner's model from the
    live counters and sets the ``"autotune"`` knobs of the running pipeline; see
    ``tuner_changes()``; before that, decode_jpeg followed by random_resized_crop, center_crop or resize is fused
    into one op that decodes only the window it needs, as ``sluice optimize`` fuses them (``tuner_fused()`` says
    what was). A dict
    sets its options: ``{"interval": seconds between looks (1), "drift": the cost
    change that makes it solve again (0.2)}``."""

    def __init__(self, spec, tune=False):
        text, origin, is_path = _spec_text(spec)
        on, interval, drift = _tune_args(tune)
        self._path = text if is_path else None
        self._runs = 0
        super().__init__(text, origin, is_path, on, interval, drift)

    def __iter__(self):
        """One run (the next epoch): yields the elements; ``it.skipped`` and ``it.stats()`` say what it did."""
        self._runs += 1
        return _Run(self, self._runs)

    def iter(self, state=None):
        """A run, as ``iter(pipeline)``; with ``state`` (bytes from ``run.state()``, of this spec or of one with
        other performance knobs) it continues where that run stood. Raises sluice.Error when the state is of
        another pipeline (naming the op that differs), damaged or truncated, or a data file changed since."""
        self._runs += 1
        return _Run(self, self._runs, state)

    def skips(self):
        """Why elements were skipped, over every run: {op path: [{"reason", "count", "first"}, ...]} for the ops
        that skipped any (the reason is the message with its numbers as '#'; "first" its first message in full)."""
        return {st["path"]: _json.loads(self._skips(i)) for i, st in enumerate(self.stats()) if st["skipped"]}

    def tuner_changes(self):
        """The online tuner's knob changes so far (``tune=True``), oldest first: one dict each with ``t`` (seconds
        since that tuner started), ``op`` (its path), ``kind``, ``fn``, ``knob`` (``"parallelism"``, ``"buffer"`` or
        ``"cache"``), ``from``, ``to``, ``reason`` (the tuner's own terms, docs/planner.md: the bottleneck and the
        predicted gain), ``why`` (the same in plain words) and ``run`` (which tuner: one tuner runs from epoch to
        epoch, keeping what it learned, until the pipeline is rebuilt by ``optimize()``; then a new one)."""
        out = []
        for run, text in enumerate(self._tuner_logs()):
            for change in _json.loads(text):
                change["run"] = run
                change["why"] = _plain_reason(change.get("reason") or "")
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
        that long to measure it. Returns the plan's summary as a dict:

        - ``baseline``, ``predicted``, ``measured``, ``bound``: throughputs in the pipeline's output elements per
          second; ``unit`` says what one is (``"batches/s"`` when the pipeline batches, else ``"elements/s"``) and
          ``examples_per_element`` how many examples a batch holds (None when not fixed), so that ``examples``
          gives the same four figures in examples per second;
        - ``bottleneck``: the sentence naming the op that limits the pipeline and why; ``limit``: what binds the
          bound (``"cpu"``, ``"disk"``, ...); ``sentences``: the analyzer's sentences (bottleneck, bound, plan);
          ``whatif``: the bound with one more core, without a cache, with more memory;
        - ``measured_min`` and ``measured_max``: the slowest and fastest of the runs ``measured`` is the median
          of, and ``check_rounds``, how many (3, or 5 when their first three spread more than 10%): how far this
          machine moves one configuration from run to run (0 when not measured);
        - ``rounds``, ``model_cpu`` and ``measured_cpu`` (seconds per element), ``other_load``, ``kept_input``,
          and ``spec``, the tuned spec."""
        summary = self._optimize(seconds=seconds, cores=cores, consumer_cores=consumer_cores, memory=memory,
                                 measure=measure)
        report = _json.loads(summary.pop("report"))
        sentences = report.get("text") or []
        summary["sentences"] = sentences
        summary["bottleneck"] = next((t for t in sentences if t.startswith("Bottleneck")), None)
        summary["limit"] = report.get("limit")
        summary["whatif"] = report.get("whatif") or {}
        summary["spec"] = _json.loads(self.to_json())
        per = _examples_per_element(summary["spec"])
        summary["unit"] = "batches/s" if per != 1 else "elements/s"
        summary["examples_per_element"] = per
        summary["examples"] = {k: summary[k] * per for k in ("baseline", "predicted", "measured", "bound")} \
            if per else None
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


_ARG_TYPES = {"number": (int, float), "integer": (int,), "string": (str,), "boolean": (bool,), "array": (list,),
              "object": (dict,)}
_DTYPES = ("uint8", "int32", "int64", "float32", "float64", "bytes")


class _MissingComponent(KeyError):
    """What reading a component the element does not have raises inside a registered Python function: a spec
    error (the name is wrong, whatever the data), which ends the run even under ``"on_error": "skip"``."""


class _Element(dict):
    """The dict a registered Python function receives: a plain dict, except that reading (``e[name]``,
    ``e.pop(name)``) a component it does not have raises _MissingComponent, a KeyError."""
    __slots__ = ()

    def __missing__(self, key):
        raise _MissingComponent(key)

    def pop(self, key, *default):
        if default or key in self:
            return super().pop(key, *default)
        raise _MissingComponent(key)


_sluice._set_element_types(_Element, _MissingComponent)


def _missing_message(fn, key, have):
    """The text of a spec error for a component a Python function read that the element lacks."""
    import difflib
    near = difflib.get_close_matches(str(key), have, n=1)
    return (f"Python function '{fn}' reads component {key!r}, which the element does not have (the element has: "
            f"{', '.join(repr(h) for h in have) or 'nothing'}){f'; did you mean {near[0]!r}?' if near else ''}")


def _components(what, decl, fn, made):
    """register_fn's reads or makes as [(name, dtype or None, shape or None)]: a list of names, or a dict of name to
    {"dtype": one of _DTYPES, "shape": [dims, None for a dim not known before running]} (both optional)."""
    if decl is None:
        return []
    if isinstance(decl, (list, tuple)) and not made:
        decl = {k: {} for k in decl}
    if not isinstance(decl, dict):
        raise TypeError(f"register_fn({fn!r}): {what} must be a " + ("dict" if made else "list or dict") +
                        f" of component names, not {type(decl).__name__}")
    out = []
    for k, d in decl.items():
        if not isinstance(k, str) or not k:
            raise ValueError(f"register_fn({fn!r}): {what}: component names are non-empty strings, found {k!r}")
        d = {} if d is None else d
        if not isinstance(d, dict) or set(d) - {"dtype", "shape"}:
            raise ValueError(f"register_fn({fn!r}): {what}[{k!r}]: expected {{'dtype': one of {', '.join(_DTYPES)}, "
                             f"'shape': [dims, None: not known]}} (both optional), found {d!r}")
        dt, shape = d.get("dtype"), d.get("shape")
        if dt is not None and dt not in _DTYPES:
            raise ValueError(f"register_fn({fn!r}): {what}[{k!r}].dtype: {dt!r} is not one of {', '.join(_DTYPES)}")
        if shape is not None and (not isinstance(shape, (list, tuple)) or len(shape) > 8 or not all(
                x is None or (isinstance(x, int) and not isinstance(x, bool) and x >= 0) for x in shape)):
            raise ValueError(f"register_fn({fn!r}): {what}[{k!r}].shape: expected a list of at most 8 dims (each an "
                             f"int >= 0, or None when not known before running), found {shape!r}")
        out.append((k, dt, None if shape is None else [-1 if x is None else x for x in shape]))
    return out


def register_fn(name, fn, args=None, random=False, filter=False, reads=None, makes=None, outputs=None):
    """Registers the Python function ``fn(element_dict, **args) -> element_dict`` as map function ``name``, usable
    in specs like any function (``{"op": "map", "fn": name, "args": {...}}``). With ``filter=True`` it is a
    predicate for ``filter`` (returns true to keep).

    ``args`` declares the spec args it takes: ``{"sigma": {"type": "number", "default": 0.1}, "mode": {"type":
    "string"}}`` (types: number, integer, string, boolean, array, object; no default: required). They are checked
    when the pipeline is built, as C functions' args are (an unknown name is refused with the nearest known one, a
    wrong type or a missing required arg names its JSON path), and passed as keyword arguments.

    ``random=True`` says its output depends on randomness (then it takes no cache above it) and passes
    ``rng=``: a ``numpy.random.Generator`` seeded per element from the pipeline's seed, the op, the epoch and the
    element's index (the seed C functions get), so the same spec gives the same values whatever the parallelism.

    The input arrays are read-only views of the engine's buffers; return new arrays (or the same ones, passed on
    without a copy), ``bytes``, ``int`` or ``float``. Python functions run under the GIL: together they get at most
    one core, whatever the op's parallelism. An exception inside ``fn`` fails the run at that element: iteration
    raises sluice.Error whose message carries the traceback, with the original exception as ``__cause__``.

    Reading a component the element does not have (``e["image/encodd"]``: a KeyError) is a spec error, not a data
    error: the run ends with sluice.SpecError naming the op, the component, the nearest name and the components the
    element has, also under ``"on_error": "skip"``.

    ``reads`` and ``makes`` declare the components it reads and makes, as C functions' schemas do, so that the
    pipeline is checked when it is built: ``reads=["image/encoded"]`` (or ``{"image": {"dtype": "uint8", "shape":
    [None, None, 3]}}`` to check the dtype and rank too), ``makes={"label": {"dtype": "int64", "shape": []}}``
    (dtype one of uint8, int32, int64, float32, float64, bytes; shape a list of dims, None for one not known before
    running; both optional). A read of a component no earlier op makes is then a SpecError when the pipeline is
    built, naming the op with "did you mean"; the components it makes join the element (the others it is taken to
    pass on), so that the ops after it are checked too: a typo in a later op's component is a SpecError before the
    first element. ``outputs`` is another name for ``makes`` (give one). A function that returns without a component
    it declares it makes ends the run with a SpecError. Without them the element after the function is not known
    before running."""
    spec = None
    if args is not None:
        if not isinstance(args, dict):
            raise TypeError(f"register_fn: args must be a dict of arg name to {{'type', 'default'}}, not "
                            f"{type(args).__name__}")
        spec = {}
        for k, decl in args.items():
            if not isinstance(decl, dict) or decl.get("type") not in _ARG_TYPES or set(decl) - {"type", "default"}:
                raise ValueError(f"register_fn: args[{k!r}]: expected {{'type': one of {', '.join(_ARG_TYPES)}, "
                                 f"'default': value (optional)}}, found {decl!r}")
            if "default" in decl and not _arg_fits(decl["type"], decl["default"]):
                raise ValueError(f"register_fn: args[{k!r}]: the default {decl['default']!r} is not a {decl['type']}")
            spec[str(k)] = dict(decl)
    if outputs is not None:
        if makes is not None:
            raise TypeError(f"register_fn({name!r}): give makes= or outputs= (the same declaration), not both")
        makes = outputs
    declared = reads is not None or makes is not None
    reads = _components("reads", reads, name, False)
    if filter and makes:
        raise ValueError(f"register_fn({name!r}): a filter makes no components (makes= is for map functions)")
    makes = _components("makes", makes, name, True)
    _sluice.register_fn(name, fn, random=random, filter=filter, args=spec, reads=reads, makes=makes,
                        declared=declared)


def _arg_fits(kind, v):
    if kind in ("number", "integer") and isinstance(v, bool):
        return False
    return isinstance(v, _ARG_TYPES[kind])


def _bind_args(fn, spec, given, path):
    """The keyword arguments of a Python function for one map op (called by the extension when the pipeline is
    built): ``given`` maps each declared arg to its JSON text in the spec, or None when absent."""
    out = {}
    for k, decl in spec.items():
        text = given.get(k)
        if text is None:
            if "default" not in decl:
                raise SpecError(f"{path}.{k}: required by function '{fn}' (a {decl['type']})")
            out[k] = decl["default"]
            continue
        v = _json.loads(text)
        if not _arg_fits(decl["type"], v):
            kind = ("an " if decl["type"][0] in "aeiou" else "a ") + decl["type"]
            raise SpecError(f"{path}.{k}: expected {kind} for function '{fn}', found {text}")
        out[k] = v
    return out


def convert(spec, to="tfrecord", out=None, shards=1, prefix="train"):
    """Writes the elements a spec yields (a path, JSON string, dict or Pipeline) into ``shards`` files
    ``out/PREFIX-00000-of-0000N.tfrecord`` (tf.Example records) or ``.tar`` (WebDataset samples), as
    ``sluice convert SPEC --to TO --out OUT --shards N`` does (docs/python.md says how components are named).
    Every file is written under a temporary name and renamed when all are complete: an error or Ctrl-C leaves
    none. Returns ``{"elements", "files", "bytes"}``; raises DataError naming the element for what a shard cannot
    hold (decoded pixels, a list in a tar member), ValueError for an unknown format."""
    if out is None:
        raise TypeError("convert: out=DIR is required")
    p = spec if isinstance(spec, Pipeline) else Pipeline(spec)
    return p._convert(_os.fspath(out), to=to, shards=int(shards), prefix=prefix)


def functions():
    """Names of the registered functions (built-in and registered from Python)."""
    return _sluice.fn_names()


# No engine thread may wait for the GIL while the interpreter finalises: stop every run first.
_atexit.register(_sluice.close_all)
