"""Checks sluice's provenance analytics on the store tests/tfx/run_tfx.py wrote, against what ml-metadata 1.16.0's own
queries say, computed here independently of sluice:

  graphlets   one per Trainer execution (get_executions_by_type), by pipeline context, with the Trainer's state;
  pushed      a graphlet pushed when a Pusher of the Trainer's pipeline_run, itself not CACHED, produced a
              PushedModel with custom property pushed = 1 (the artifact's first OUTPUT event is that Pusher's);
  spans       the `span` of the Examples the Trainer read, and of the Examples their producers read;
  waste       the cost (wall time: TFX records no cpu_seconds) of every execution of a pipeline_run without such
              a push, except runs whose Trainer was CACHED (they trained nothing);
  overlap     COMPLETE executions' Examples inputs that an earlier COMPLETE execution of the same type in the same
              pipeline read;
  the gate    the ShouldTrain decisions (its String output's custom property `train`): runs it skipped have no
              Trainer; and the expectations of the scenario (runs.json) themselves.
Then a store sluice writes (`prov init`, `prov gen`) opens in ml-metadata 1.16.0 read-only.

usage: check.py --root DIR --sluice PATH [--plant KIND]
--plant KIND perturbs sluice's JSON the way a wrong reading would (cached-push, spans, waste, overlap, graphlet,
cost-basis, gate) and the check must then fail: `make test-tfx` runs each and requires exit status 1.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

COMPLETE, CACHED, FAILED = (metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED,
                            metadata_store_pb2.Execution.FAILED)
INPUT, OUTPUT = metadata_store_pb2.Event.INPUT, metadata_store_pb2.Event.OUTPUT
STATE = {v: k for k, v in metadata_store_pb2.Execution.State.items()}

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)
    return cond


def open_store(path):
    c = metadata_store_pb2.ConnectionConfig()
    c.sqlite.filename_uri = path
    c.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(c)


def sluice_json(sluice, *args):
    r = subprocess.run([sluice, "prov"] + list(args) + ["--json"], capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 10):
        sys.exit("check: sluice prov %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return json.loads(r.stdout)


class Store:
    """The store as ml-metadata reads it, indexed for the checks below."""

    def __init__(self, s):
        self.s = s
        self.ex = {e.id: e for e in s.get_executions()}
        self.art = {a.id: a for a in s.get_artifacts()}
        self.etype = {t.id: t.name for t in s.get_execution_types()}
        self.atype = {t.id: t.name for t in s.get_artifact_types()}
        self.ctype = {t.id: t.name for t in s.get_context_types()}
        self.events = s.get_events_by_execution_ids(list(self.ex))
        self.ctx_of = {}  # execution id -> {context type name: context}
        for eid in self.ex:
            self.ctx_of[eid] = {self.ctype[c.type_id]: c for c in s.get_contexts_by_execution(eid)}
        self.inputs, self.outputs = {}, {}
        for ev in self.events:
            d = self.inputs if ev.type == INPUT else self.outputs if ev.type == OUTPUT else None
            if d is not None:
                d.setdefault(ev.execution_id, []).append(ev)
        # producer: the earliest OUTPUT event from an execution that is neither CACHED nor a Resolver
        self.producer = {}
        for ev in sorted(self.events, key=lambda e: (e.milliseconds_since_epoch, e.execution_id)):
            x = self.ex[ev.execution_id]
            if ev.type != OUTPUT or x.last_known_state == CACHED or self.etype[x.type_id].endswith("Resolver"):
                continue
            self.producer.setdefault(ev.artifact_id, ev.execution_id)

    def kind(self, eid):
        return self.etype[self.ex[eid].type_id]

    def pipeline(self, eid):
        c = self.ctx_of[eid].get("pipeline")
        return c.name if c else None

    def run(self, eid):
        c = self.ctx_of[eid].get("pipeline_run")
        return c.id if c else None

    def cost(self, eid):
        x = self.ex[eid]
        return max(0, x.last_update_time_since_epoch - x.create_time_since_epoch) / 1000.0

    def span(self, aid):
        """TFX declares `span` on Examples, but CsvExampleGen 1.16 writes it as a custom property (and Transform's
        transformed_examples carry none)."""
        a = self.art[aid]
        for props in (a.properties, a.custom_properties):
            if "span" in props:
                return props["span"].int_value
        return None


def expected(st):
    trainers = sorted((e for e in st.ex if st.kind(e).endswith("Trainer")),
                      key=lambda e: (st.pipeline(e), st.ex[e].create_time_since_epoch, e))
    # Runs with a real push: a Pusher (not CACHED) that produced a PushedModel with pushed = 1.
    pushed_runs = set()
    for e in st.ex:
        if not st.kind(e).endswith("Pusher") or st.ex[e].last_known_state == CACHED:
            continue
        for ev in st.outputs.get(e, []):
            a = st.art[ev.artifact_id]
            if (st.atype[a.type_id] == "PushedModel" and st.producer.get(a.id) == e
                    and "pushed" in a.custom_properties and a.custom_properties["pushed"].int_value == 1):
                pushed_runs.add(st.run(e))
    graphlets = []
    for t in trainers:
        spans = set()
        for ev in st.inputs.get(t, []):
            a = st.art[ev.artifact_id]
            if st.atype[a.type_id] != "Examples":
                continue
            spans.add(st.span(a.id))
            p = st.producer.get(a.id)
            for ev2 in st.inputs.get(p, []) if p else []:
                if st.atype[st.art[ev2.artifact_id].type_id] == "Examples":
                    spans.add(st.span(ev2.artifact_id))
        state = st.ex[t].last_known_state
        graphlets.append({"trainer": t, "pipeline": st.pipeline(t), "trainer_state": STATE[state],
                          "pushed": state == COMPLETE and st.run(t) in pushed_runs,
                          "spans": sorted(s for s in spans if s is not None)})
    total = sum(st.cost(e) for e in st.ex)
    # A run whose Trainer was CACHED trained nothing: its steps are not waste. (Upstream from other runs: each run
    # here reads its own ExampleGen's output, or a window of spans whose readers pushed.)
    cached_runs = {st.run(t) for t in trainers if st.ex[t].last_known_state == CACHED}
    wasted = sum(st.cost(e) for e in st.ex if st.run(e) not in pushed_runs | cached_runs)
    # Overlap: per (pipeline, type, artifact), every COMPLETE reader after the first re-processes it.
    seen, reads = set(), {}
    for e in sorted(st.ex, key=lambda e: (st.ex[e].create_time_since_epoch, e)):
        if st.ex[e].last_known_state != COMPLETE:
            continue
        arts = sorted({ev.artifact_id for ev in st.inputs.get(e, [])
                       if st.atype[st.art[ev.artifact_id].type_id] == "Examples"})
        if not arts:
            continue
        again = 0
        for a in arts:
            k = (st.pipeline(e), st.ex[e].type_id, a)
            again += k in seen
            seen.add(k)
        reads[e] = (len(arts), again)
    with_overlap = sum(1 for n, again in reads.values() if again)
    recomputed = sum(st.cost(e) * again / n for e, (n, again) in reads.items())
    return graphlets, {"total": total, "wasted": wasted}, {"executions": len(reads), "with_overlap": with_overlap,
                                                          "recomputed_cost": recomputed}


def plant(kind, gl, waste, ov):
    """What a wrong reading would give."""
    g = gl["graphlets"]
    if kind == "cached-push":  # the bug of issue 51: a CACHED run counted as a push
        for x in g:
            if x["trainer_state"] == "CACHED":
                x["pushed"] = True
    elif kind == "spans":
        g[-1]["spans"] = g[-1]["spans"][1:]
    elif kind == "waste":
        waste["wasted"] += 1.0
    elif kind == "overlap":
        ov["total"]["with_overlap"] += 1
    elif kind == "graphlet":
        g.pop()
    elif kind == "cost-basis":
        gl["cost_basis"] = "cpu_seconds"
    elif kind == "gate":
        return True
    else:
        sys.exit("check: unknown --plant " + kind)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--plant")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    db = os.path.join(root, "metadata.sqlite")
    runs = json.load(open(os.path.join(root, "runs.json")))
    st = Store(open_store(db))
    want_g, want_w, want_o = expected(st)

    gl = sluice_json(a.sluice, "graphlets", db, "--top", "1000")
    waste = sluice_json(a.sluice, "waste", db)
    ov = sluice_json(a.sluice, "overlap", db)
    stats = sluice_json(a.sluice, "stats", db)
    flip_gate = plant(a.plant, gl, waste, ov) if a.plant else False

    # The scenario itself, from the store: 5 Trainer executions in tfx-a (one CACHED, one FAILED), 2 in tfx-b.
    by_pipe = {}
    for x in want_g:
        by_pipe.setdefault(x["pipeline"], []).append(x)
    expect(sorted(by_pipe) == ["tfx-a", "tfx-b"], "pipelines in the store: %s" % sorted(by_pipe))
    states_a = [x["trainer_state"] for x in by_pipe.get("tfx-a", [])]
    expect(states_a == ["COMPLETE", "COMPLETE", "CACHED", "COMPLETE", "FAILED"],
           "tfx-a Trainer states by ml-metadata: %s" % states_a)
    expect([x["pushed"] for x in by_pipe.get("tfx-a", [])] == [True, True, False, False, False],
           "tfx-a pushes by ml-metadata: %s" % [x["pushed"] for x in by_pipe.get("tfx-a", [])])
    expect([x["spans"] for x in by_pipe.get("tfx-b", [])] == [[1], [1, 2]],
           "tfx-b spans by ml-metadata (a rolling window of 2): %s" % [x["spans"] for x in by_pipe.get("tfx-b", [])])

    # Graphlets: one per Trainer execution, same pipeline, state, outcome and spans.
    got = [{"trainer": x["trainer"], "pipeline": x["pipeline"], "trainer_state": x["trainer_state"],
            "pushed": x["pushed"], "spans": x["spans"]} for x in gl["graphlets"]]
    got.sort(key=lambda x: (x["pipeline"], x["trainer"]))
    want = sorted(want_g, key=lambda x: (x["pipeline"], x["trainer"]))
    expect(len(got) == len(want), "graphlets: sluice %d, ml-metadata %d Trainer executions" % (len(got), len(want)))
    for w, g in zip(want, got):
        expect(w == g, "graphlet of Trainer %d: sluice %s, ml-metadata %s" % (w["trainer"], g, w))
    expect(gl["pushed"] == sum(x["pushed"] for x in want_g),
           "pushed: sluice %d, ml-metadata %d" % (gl["pushed"], sum(x["pushed"] for x in want_g)))
    expect(gl["cost_basis"] == "wall", "cost basis: %s (TFX records no cpu_seconds: wall time)" % gl["cost_basis"])
    expect(stats["graphlets"] == len(want_g) and stats["pipelines"] == 2,
           "stats: %d graphlets in %d pipelines" % (stats["graphlets"], stats["pipelines"]))

    # Waste (wall seconds: the store's times are whole milliseconds, so the sums are exact to 1 ms each; sluice
    # prints them with 6 significant digits).
    tol = 0.01 + 1e-5 * want_w["total"]
    expect(abs(waste["total"] - want_w["total"]) <= tol,
           "total compute: sluice %.3f s, ml-metadata %.3f s" % (waste["total"], want_w["total"]))
    expect(abs(waste["wasted"] - want_w["wasted"]) <= tol,
           "wasted compute: sluice %.3f s, ml-metadata %.3f s" % (waste["wasted"], want_w["wasted"]))

    # Overlap.
    t = ov["total"]
    expect(t["executions"] == want_o["executions"] and t["with_overlap"] == want_o["with_overlap"],
           "overlap: sluice %d executions with Examples inputs, %d with overlap; ml-metadata %d, %d"
           % (t["executions"], t["with_overlap"], want_o["executions"], want_o["with_overlap"]))
    expect(want_o["with_overlap"] >= 1, "the rolling window re-read a span (ml-metadata: %d)" % want_o["with_overlap"])
    expect(abs(t["recomputed_cost"] - want_o["recomputed_cost"]) <= tol,
           "recomputed cost: sluice %.3f, ml-metadata %.3f" % (t["recomputed_cost"], want_o["recomputed_cost"]))

    # The gate: its decisions as recorded by TFX; the skipped run has no Trainer.
    gate = sorted((e for e in st.ex if st.kind(e).endswith("ShouldTrain")), key=lambda e: st.ex[e].create_time_since_epoch)
    decisions = []
    for e in gate:
        outs = [st.art[ev.artifact_id] for ev in st.outputs.get(e, [])]
        decisions.append(outs[0].custom_properties["train"].int_value if outs else None)
    if flip_gate:
        decisions[-1] = 1 - decisions[-1]
    expect(decisions == [1, 1, 0], "the gate's decisions in tfx-b: %s (want train, train, skip)" % decisions)
    b_runs = [r for r in runs["runs"] if r["pipeline"] == "tfx-b"]
    expect(len(by_pipe.get("tfx-b", [])) == len(b_runs) - 1,
           "tfx-b: %d Trainer executions in %d runs (the gate skipped one)" % (len(by_pipe.get("tfx-b", [])), len(b_runs)))
    last_b = sluice_json(a.sluice, "should-train", db, "--pipeline", "tfx-b", "--threshold", str(runs["threshold"]))
    expect(last_b["decision"] == "skip", "should-train on tfx-b now: %s" % last_b["decision"])

    # A store sluice writes opens in ml-metadata 1.16.0.
    with tempfile.TemporaryDirectory() as d:
        mine = os.path.join(d, "sluice.sqlite")
        r = subprocess.run([a.sluice, "prov", "gen", mine, "--pipelines", "2", "--days", "3", "--seed", "1"],
                           capture_output=True, text=True, timeout=600)
        expect(r.returncode == 0, "sluice prov gen: %s" % r.stderr)
        s2 = open_store(mine)
        ex2 = s2.get_executions()
        n_ex = sluice_json(a.sluice, "stats", mine)["executions"]
        expect(len(ex2) == n_ex and len(ex2) > 0,
               "ml-metadata 1.16.0 reads %d executions from a sluice store; sluice wrote %d" % (len(ex2), n_ex))
        expect(len(s2.get_artifacts()) > 0 and len(s2.get_contexts()) > 0, "artifacts and contexts of a sluice store")

    if failures:
        print("check: %d assertion(s) failed%s" % (len(failures), " (planted: %s)" % a.plant if a.plant else ""))
        sys.exit(1)
    print("check: graphlets %d (%s), pushed %d, wasted %.1f of %.1f s (wall), overlap %d of %d executions, "
          "gate %s, a sluice store opens in ml-metadata: all agree"
          % (len(want_g), ", ".join("%s %d" % (p, len(v)) for p, v in sorted(by_pipe.items())),
             gl["pushed"], waste["wasted"], waste["total"], t["with_overlap"], t["executions"], decisions))


if __name__ == "__main__":
    main()
