"""sluice.torch.report: the Report: the bottleneck in words, the figures, the text and HTML page, the translated
spec's plan."""

import json as _json
import time as _time

import sluice as _sluice

from . import check as _ck
from .common import DiagnoseError, MIN_BATCHES, _pct, _rate, _size
from .loader import _batch_size, _loop_cpu
from .model import BUSY_OTHER_LOAD, _Model, _cache_whatif, _recommend
from .probe import _probe_hand_off, _probe_no_workers
from .trace import _build_trace
from .tracer import _Stop, _Tracer
from .translate import _translate


def default_spec_seconds(seconds):
    """How long the translated spec is planned for by default after a window of `seconds`."""
    return min(5.0, max(1.0, seconds / 4))


def default_check_seconds(seconds):
    """How long each run of the check lasts by default after a window of `seconds`."""
    return min(3.0, max(0.5, seconds / 6))


# A step with this share of the workers' CPU is named the bottleneck of their stage in a window of few batches.
DOMINANT = 0.5


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
    samples = nb * fig["samples_per_batch"]
    short = None
    main = fig["transfer_cpu"] + (fig["pin_cpu"] or 0.0) + (fig["step_wall"] or 0.0)
    if rep.get("too_short") and samples >= MIN_BATCHES and (share >= DOMINANT or W == 0) and \
            fig["work_wall"] / max(W, 1) >= main:
        # Few batches, but the workers' steps ran on every sample of them: a step with most of their CPU is the
        # bottleneck of the workers' stage whatever the batch count (the planner's bound is the rough part); without
        # workers the main process doing every sample's work is, whichever step has the most of it
        bi, bop = 1, trace["ops"][1]
        short = (f" ({nb} batch{'es' if nb != 1 else ''} in {T:.1f} s, fewer than the {MIN_BATCHES} the planner's "
                 f"bound needs; {samples:.0f} samples through every step)")
    if rep.get("too_short") and bi < 0:
        kind, words = "too short", (f"the trace is too short: {nb} batches of {samples / max(nb, 1):.0f} samples "
                                    f"(the planner needs {MIN_BATCHES} batches, and no step has {_pct(DOMINANT)} of "
                                    f"the workers' CPU: {top} has {_pct(share)}); trace for longer")
    elif bop is None:
        kind, words = "none", "no bottleneck: every stage costs nothing measurable"
    elif bi == 1:
        # Blocked against the time the workers ran or were blocked: the time they waited for a core (other load's
        # doing, beside a busy machine's) is neither theirs to overlap nor a reason to name them blocked
        own = fig["work_wall"] - (fig["worker_runq"] or 0.0)
        if own > 0 and blocked > 0.5 * own:
            kind = "disk" if fig["disk_bytes"] > 0 else "blocked"
            what = "reading from disk" if kind == "disk" else "blocked (I/O, sleeps or locks)"
            words = (f"{'disk' if kind == 'disk' else 'waiting'}: the workers spend {_pct(blocked / own)}"
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
    if short:
        words += short
    return {"kind": kind, "stage": bop["label"] if bop else None, "words": words, "step": top, "step_share": share,
            "planned_workers": planned_w}


class Report:
    """What ``diagnose`` found: ``print(report)`` (the words), ``to_dict()`` (the figures: ``bottleneck``,
    ``bound``, ``measured``, ``recommend``, ...), ``save_html(path)`` (the ``sluice report`` page of the loader's
    trace, with the words on top), ``spec`` (the same pipeline in sluice, or None) and ``trace`` (the sluice
    trace, the JSON ``sluice analyze`` reads). Also a context manager: ``diagnose(loader, None)``."""

    def __init__(self, loader, cores=0, memory=0, spec_seconds=None, check_seconds=None, progress=None):
        self.loader = loader
        self.cores, self.memory = cores, memory
        self._spec_seconds, self._check_seconds, self._progress = spec_seconds, check_seconds, progress
        self._planned = None  # the translated spec's pipeline as compare_spec() planned it
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
        if ok:
            self._verify()

    # -- analysis
    def _fill(self, tr, consumer):
        trace, fig = _build_trace(tr, consumer)
        fig["loop_cpu"], fig["probe_cpu"] = _loop_cpu(self.loader)
        fig["no_workers"], no_probe = None, None
        fig["handoff"], no_handoff = None, None
        if self.loader.num_workers > 0:  # without workers the traced run measured num_workers=0 itself
            fig["no_workers"], no_probe = _probe_no_workers(self.loader, fig["work_wall"] / fig["batches"])
        else:  # ... and not what workers would cost to hand batches over
            fig["handoff"], no_handoff = _probe_hand_off(self.loader)
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
                       max(rep["budget"]["cores"] - max(fig["other_load"], 0.0), 1.0), L.persistent_workers,
                       cores=rep["budget"]["cores"], other=0.0 if self.cores else fig["other_load"])
        proposal = _recommend(L, rep, fig, model, v["kind"], measured)
        base = model.rate(L.num_workers, L.persistent_workers)
        self.spec, self.python_steps, notes = _translate(L)
        if no_probe:
            notes.append("num_workers=0 is priced from the workers' figures (which carry their hand-off: pickling "
                         f"batches slows the steps between): the probe without workers gave no figure: {no_probe}")
        if no_handoff:
            notes.append("workers are priced without their hand-off (pickling each batch in a worker, unpickling it "
                         f"here): the probe with one worker gave no figure: {no_handoff}")
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
                         "no_workers": fig["no_workers"], "handoff": fig["handoff"],
                         "steps": {n: {"cpu_per_sample": p[0] * k / (nb * per), "wall_per_sample":
                                       p[1] * k / (nb * per), "share": part_cpu[n] / total_part}
                                   for n, p in fig["parts"].items()}},
            "proposal": proposal,
            "recommend": {},  # the proposal once measured faster than the settings as given (_verify)
            "check": None,
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

    def _say(self, msg):
        if self._progress is not None:
            self._progress(msg)

    def _verify(self):
        """The checks after the analysis: the translated spec planned (compare_spec), then the loader with the
        model's proposal and as given, and the planned spec, run alternately (check.py); the proposal becomes the
        recommendation only when it measured faster."""
        d = self._d
        T = d["measured"]["seconds"]
        spec_s = default_spec_seconds(T) if self._spec_seconds is None else self._spec_seconds
        check_s = default_check_seconds(T) if self._check_seconds is None else self._check_seconds
        L = self.loader
        given = _ck.settings_of(L)
        prop = d["proposal"]
        psettings = _ck.applied(given, {k: v["value"] for k, v in prop.items()})
        measured = d["measured"]["batches_per_s"]
        gain = prop["num_workers"]["predicted"] / measured if measured > 0 else 1.0
        go, why = _ck.decide(given, psettings, gain, getattr(L, "_sluice_tuned", None))
        nxt = prop["num_workers"].get("next")  # beside other load: a worker more, measured too (model._recommend)
        nsettings = dict(psettings, num_workers=nxt["value"]) if nxt is not None else None
        sluice_p = None
        if spec_s > 0 and self.spec is not None and not self.python_steps:
            # Planning traces the spec for 32 batches (1.5x that), twice: at this loader's rate that may take far
            # longer than spec_seconds; then the spec is measured as translated, tuned online (Pipeline(tune=True))
            need = 2 * 1.5 * MIN_BATCHES / measured if measured > 0 else float("inf")
            try:
                if need <= 2 * spec_s:
                    self._say(f"planning the same pipeline in sluice ({spec_s:.3g} s)")
                    self.compare_spec(seconds=spec_s)
                    sluice_p = self._planned
                elif check_s > 0:
                    sluice_p = self.pipeline(tune=True)
                    d["sluice_spec"] = {"predicted": None, "baseline": None, "bound": None, "over_loader": None,
                                        "unit": "batches/s" if any(o["op"] == "batch" for o in self.spec["ops"])
                                        else "elements/s", "spec": self.spec, "planned": False,
                                        "why": f"as translated, tuned online (planning it traces 32 batches twice: "
                                               f"about {need:.0f} s at the loader's rate; report.compare_spec())"}
            except _sluice.Error as e:  # the diagnosis stands without it
                d["notes"].append(f"the translated spec did not run: {e}")
        contenders = {}
        if check_s > 0 and (go or sluice_p is not None):
            contenders["as given"] = _ck.loader_contender(L, given)
            if go:
                contenders["proposed"] = _ck.loader_contender(
                    L, psettings, d["measured"]["worker_cpu_per_batch"] + d["measured"]["worker_blocked_per_batch"])
                if nxt is not None:
                    contenders["a worker more"] = _ck.loader_contender(
                        L, nsettings, d["measured"]["worker_cpu_per_batch"] + d["measured"]["worker_blocked_per_batch"])
            if sluice_p is not None:
                contenders["sluice"] = _ck.pipeline_contender(sluice_p)
            startup = d["measured"]["startup_seconds"] or 0.0
            run = max(check_s, _ck.MIN_RUN_BATCHES / measured) if measured > 0 else 2 * check_s
            loaders = len(contenders) - ("sluice" in contenders)
            est = _ck.ROUNDS * (len(contenders) * (min(run, 2 * check_s) + startup) + loaders * _ck.WARMUP)
            self._say(f"measuring {', '.join(contenders)}: {_ck.ROUNDS} rounds of {check_s:.3g} s runs, about "
                      f"{est:.0f} s with the start-ups")
        rates, failed, counts = _ck.run_rounds(contenders, check_s, _ck.ROUNDS, self._say) if contenders else \
            ({}, {}, {})
        faster, ratio, least = False, None, None
        if "sluice" in failed:
            d["notes"].append(f"the same pipeline in sluice did not run: {failed['sluice']}")
        if "proposed" in failed:
            why = f"the model's proposal ({_ck.words(psettings)}) could not be measured: {failed['proposed']}"
        elif go and check_s > 0:
            least = _ck.MIN_RUN_BATCHES
            verdicts = {}
            for name, g in (("proposed", gain), ("a worker more", nxt["predicted"] / measured if nxt else None)):
                if name in rates and rates[name] and name not in failed:
                    fewest = min(counts["as given"] + counts[name])
                    verdicts[name] = _ck.verdict(rates["as given"], rates[name], g, check_s, _ck.ROUNDS, fewest,
                                                 least)
            won = _ck.choose(verdicts)
            faster, ratio, why = verdicts[won] if won else verdicts["proposed"]
            if won == "a worker more":
                prop = dict(prop, num_workers=dict(prop["num_workers"], value=nxt["value"], predicted=nxt["predicted"],
                                                   why=f"{nxt['value']} workers: a worker more than the model's "
                                                       f"pick, which measured {verdicts['proposed'][1]:.2f}x"))
                psettings = nsettings
                gain = nxt["predicted"] / measured
            if not faster:
                why = f"the model's proposal ({_ck.words(psettings)}) {why}"
            if "a worker more" in verdicts:
                d["notes"].append(f"beside other load the check also ran a worker more than the model's pick "
                                  f"({nxt['value']} workers): {verdicts['a worker more'][1]:.2f}x the settings as "
                                  f"given, the pick ({nxt['value'] - 1}) {verdicts['proposed'][1]:.2f}x")
        elif go:
            why = (f"the model's proposal ({_ck.words(psettings)}, predicted {gain:.2f}x) was not measured "
                   "(check_seconds=0), and only a measured change is recommended")
        if "a worker more" in failed:
            d["notes"].append(f"a worker more than the model's pick could not be measured: {failed['a worker more']}")
        if faster:
            d["recommend"] = prop
        d["check"] = {"given": given, "proposal": psettings, "predicted_gain": gain, "measured_gain": ratio,
                      "a_worker_more": nsettings if "a worker more" in rates else None,
                      "recommended": faster, "why": why, "seconds_each": check_s, "rounds": _ck.ROUNDS if rates else 0,
                      "rates": rates, "batches": counts, "least_batches": least, "failed": failed}
        sp = d.get("sluice_spec")
        if sp is not None and rates.get("sluice"):
            g = _ck.total(rates["as given"])
            sp["measured"] = _ck.total(rates["sluice"])
            sp["measured_over_loader"] = sp["measured"] / g if g > 0 else None
        self._planned = None  # its threads and buffers go with it

    def _need(self):
        if self._d is None:
            raise DiagnoseError("sluice.torch.diagnose: the report is not ready (the with block has not ended)")
        return self._d

    def to_dict(self):
        """The figures: bottleneck, bound, predicted, measured, recommend, whatif, spec (JSON-ready)."""
        return _json.loads(_json.dumps(self._need()))

    @property
    def recommended(self):
        """The recommended DataLoader settings as keyword arguments: empty when no change measured faster."""
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
               (f"; other processes kept {m['other_load']:.1f} cores busy" if m["other_load"] >= BUSY_OTHER_LOAD else "") + ")"]
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
        c = d.get("check") or {}
        if d["recommend"]:
            out.append(f"  recommend ({c.get('why')}):")
            for k, v in d["recommend"].items():
                out.append(f"    {k}={v['value']!r} (now {v['was']!r}): {v['why']}")
        else:
            out.append(f"  recommend: no change helps here: {c.get('why') or 'not checked'}")
        sp = d.get("sluice_spec")
        if sp is not None and sp.get("measured_over_loader") is not None:
            how = (f"predicted {sp['over_loader']:.2f}x; report.spec, planned: report.to_dict()['sluice_spec']['spec']"
                   if sp.get("over_loader") is not None else f"{sp['why']}; report.spec")
            out.append(f"  the same pipeline in sluice: measured {sp['measured_over_loader']:.2f}x the loader as given "
                       f"({_rate(sp['measured'])} against {_rate(_ck.total(c['rates']['as given']))} {sp['unit']}, "
                       f"{c['rounds']} alternating rounds of {c['seconds_each']:.3g} s; {how})")
        elif sp is not None and sp.get("over_loader") is not None:
            out.append(f"  the same pipeline in sluice: predicted {sp['over_loader']:.2f}x ({_rate(sp['predicted'])} "
                       f"{sp['unit']}, not measured; report.spec, planned: report.to_dict()['sluice_spec']['spec'])")
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
        self._planned = p
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
