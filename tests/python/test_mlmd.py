# test_mlmd.py: sluice's provenance store against the real ml-metadata library (pinned in the Makefile, installed
# into the test venv by `make test-python`): stores the library writes open in `sluice prov` with what the test
# computes from the library's own queries, and stores sluice writes open in the library with what sluice wrote.
import base64
import json
import os
import sqlite3
import subprocess
import tempfile
import time
from urllib.parse import urlparse

import pytest

from conftest import run_cli

try:
    from google.protobuf import any_pb2
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2 as pb
except ImportError as e:  # the Makefile says why the wheel did not install, or that it must have
    why = os.environ.get("SLUICE_MLMD_SKIP")
    if why:
        pytest.skip(f"ml-metadata could not be installed on this platform: {why}", allow_module_level=True)
    if os.environ.get("SLUICE_MLMD_REQUIRED"):
        raise
    pytest.skip(f"ml-metadata is not installed ({e}); `make test-python` installs it", allow_module_level=True)

EXEC_STATES = {pb.Execution.UNKNOWN: "UNKNOWN", pb.Execution.NEW: "NEW", pb.Execution.RUNNING: "RUNNING",
               pb.Execution.COMPLETE: "COMPLETE", pb.Execution.FAILED: "FAILED", pb.Execution.CACHED: "CACHED",
               pb.Execution.CANCELED: "CANCELED"}
ART_STATES = {pb.Artifact.UNKNOWN: "UNKNOWN", pb.Artifact.PENDING: "PENDING", pb.Artifact.LIVE: "LIVE",
              pb.Artifact.MARKED_FOR_DELETION: "MARKED_FOR_DELETION", pb.Artifact.DELETED: "DELETED",
              pb.Artifact.ABANDONED: "ABANDONED", pb.Artifact.REFERENCE: "REFERENCE"}
EVENT_TYPES = {pb.Event.UNKNOWN: "UNKNOWN", pb.Event.DECLARED_OUTPUT: "DECLARED_OUTPUT",
               pb.Event.DECLARED_INPUT: "DECLARED_INPUT", pb.Event.INPUT: "INPUT", pb.Event.OUTPUT: "OUTPUT",
               pb.Event.INTERNAL_INPUT: "INTERNAL_INPUT", pb.Event.INTERNAL_OUTPUT: "INTERNAL_OUTPUT",
               pb.Event.PENDING_OUTPUT: "PENDING_OUTPUT"}
PTYPES = {pb.INT: "INT", pb.DOUBLE: "DOUBLE", pb.STRING: "STRING", pb.STRUCT: "STRUCT", pb.PROTO: "PROTO",
          pb.BOOLEAN: "BOOLEAN"}


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def connect(store, mode=pb.SqliteMetadataSourceConfig.READWRITE_OPENCREATE):
    """The library on a SQLite file (in `mode`) or a postgresql://user@host:port/db URI (its client's PostgreSQL
    source; no read-only mode there)."""
    c = pb.ConnectionConfig()
    if str(store).startswith("postgresql://"):
        u = urlparse(str(store))
        c.postgresql.host = u.hostname
        c.postgresql.port = str(u.port)
        c.postgresql.user = u.username
        c.postgresql.dbname = u.path.lstrip("/")
    else:
        c.sqlite.filename_uri = str(store)
        c.sqlite.connection_mode = mode
    return metadata_store.MetadataStore(c)


@pytest.fixture(scope="module")
def pg():
    """A throw-away PostgreSQL server (tools/pg_start.sh) for this module; new_db() gives a fresh database's URI."""
    d = tempfile.mkdtemp(prefix="sluice-mlmd-pg-")
    r = subprocess.run(["bash", os.path.join(ROOT, "tools", "pg_start.sh"), d], capture_output=True, text=True)
    if r.returncode:
        pytest.fail(f"tools/pg_start.sh: {r.stderr}")
    uri = open(os.path.join(d, "uri")).read().strip()
    psql = os.path.join(open(os.path.join(d, "bin")).read().strip(), "psql")
    n = [0]

    def new_db():
        n[0] += 1
        name = f"mlmd{n[0]}"
        subprocess.run([psql, uri, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
        return uri.rsplit("/", 1)[0] + "/" + name
    new_db.psql = psql
    yield new_db
    subprocess.run(["bash", os.path.join(ROOT, "tools", "pg_stop.sh"), d], capture_output=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store(request, tmp_path):
    """A fresh, empty store of either backend: its path or URI."""
    if request.param == "sqlite":
        return lambda: tmp_path / f"s{time.monotonic_ns()}.sqlite"
    return request.getfixturevalue("pg")


def cli_json(cli, *args):
    return json.loads(run_cli(cli, *args, "--json").stdout)


def lib_value(v):
    """A library Value as `sluice prov --json` prints it: STRUCT as its JSON text (compared parsed), PROTO as the
    serialized Any's size and base64."""
    which = v.WhichOneof("value")
    if which == "struct_value":
        from google.protobuf.json_format import MessageToDict
        return ("struct", MessageToDict(v.struct_value))
    if which == "proto_value":
        raw = v.proto_value.SerializeToString()
        return {"bytes": len(raw), "base64": base64.b64encode(raw).decode()}
    return getattr(v, which)


def sluice_value(v, want):
    if isinstance(want, tuple):  # a STRUCT: sluice prints its JSON text
        return ("struct", json.loads(v))
    return v


def same_props(sl, lib):
    assert set(sl) == set(lib), (sl, lib)
    for k, v in lib.items():
        want = lib_value(v)
        got = sluice_value(sl[k], want)
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-12), k
        else:
            assert got == want, k


def any_of(value):
    a = any_pb2.Any()
    a.Pack(value)
    return a


def set_all_values(props, tag, big=True):
    """Custom properties of every value type, STRUCT and PROTO included. `big`: an int beyond 32 bits, which the
    library's own PostgreSQL schema (INTEGER int_value) cannot hold."""
    props["i"].int_value = (-(2 ** 40) if big else -(2 ** 30)) - tag
    props["d"].double_value = 0.1 * tag + 1e-9
    props["s"].string_value = f"text {tag} ü"
    props["e"].string_value = ""
    props["b"].bool_value = tag % 2 == 0
    props["st"].struct_value.update({"k": [1, "x", {"y": True, "z": None}], "n": 2.5, "tag": tag, "o": {}})
    props["pr"].proto_value.CopyFrom(any_of(pb.Value(string_value=f"packed {tag}")))


class Library:
    """A TFX-like store written through the library's API, and the answers computed from its own queries."""

    def __init__(self, path):
        self.s = connect(path)
        big = not str(path).startswith("postgresql://")
        s = self.s
        ct = pb.ContextType(name="pipeline")
        ct.properties["owner"] = pb.STRING
        self.t_pipe = s.put_context_type(ct)
        ct = pb.ContextType(name="pipeline_run")
        ct.properties["run_no"] = pb.INT
        self.t_run = s.put_context_type(ct)
        at = pb.ArtifactType(name="Examples", base_type=pb.ArtifactType.DATASET, version="2", description="splits")
        at.properties["span"] = pb.INT
        at.properties["split_names"] = pb.STRING
        self.t_ex = s.put_artifact_type(at)
        self.t_model = s.put_artifact_type(pb.ArtifactType(name="Model", base_type=pb.ArtifactType.MODEL))
        self.t_bless = s.put_artifact_type(pb.ArtifactType(name="ModelBlessing"))
        self.t_pushed = s.put_artifact_type(pb.ArtifactType(name="PushedModel"))
        self.t_stats = s.put_artifact_type(pb.ArtifactType(name="ExampleStatistics",
                                                           base_type=pb.ArtifactType.STATISTICS))
        et = pb.ExecutionType(name="tfx.components.trainer.component.Trainer", base_type=pb.ExecutionType.TRAIN)
        for k, t in (("train_steps", pb.INT), ("lr", pb.DOUBLE), ("module_file", pb.STRING), ("cfg", pb.STRUCT),
                     ("blob", pb.PROTO), ("warm", pb.BOOLEAN)):
            et.properties[k] = t
        self.t_trainer = s.put_execution_type(et)
        self.t_gen = s.put_execution_type(pb.ExecutionType(name="CsvExampleGen"))
        self.t_statgen = s.put_execution_type(pb.ExecutionType(name="StatisticsGen"))
        self.t_eval = s.put_execution_type(pb.ExecutionType(name="Evaluator", base_type=pb.ExecutionType.EVALUATE))
        self.t_push = s.put_execution_type(pb.ExecutionType(name="Pusher", base_type=pb.ExecutionType.DEPLOY))

        pipe = pb.Context(type_id=self.t_pipe, name="lib-pipe")
        pipe.properties["owner"].string_value = "team-a"
        set_all_values(pipe.custom_properties, 1, big)
        [self.pipe] = s.put_contexts([pipe])
        for run_no, pushed in ((1, 1), (2, 0), (3, 1)):
            self.run(run_no, pushed)
        # Outside any run: an execution in every state (cost by cpu_seconds), and one artifact in every state.
        arts = []
        for st in ART_STATES:
            a = pb.Artifact(type_id=self.t_stats, uri=f"/stats/{st}", state=st)
            set_all_values(a.custom_properties, st, big)
            arts.append(a)
        self.loose_arts = s.put_artifacts(arts)
        for st in EXEC_STATES:
            e = pb.Execution(type_id=self.t_statgen, last_known_state=st, name=f"loose-{st}")
            e.custom_properties["cpu_seconds"].double_value = 1.5 + st
            [eid] = s.put_executions([e])
            s.put_events([pb.Event(artifact_id=self.loose_arts[st], execution_id=eid, type=pb.Event.OUTPUT)])

    def tick(self):
        time.sleep(0.003)  # the library stamps create times itself: keep the steps of a run in order

    def put_exec(self, type_id, state, cpu=None, ctxs=(), inputs=(), outputs=(), props=None):
        e = pb.Execution(type_id=type_id, last_known_state=state)
        if cpu is not None:
            e.custom_properties["cpu_seconds"].double_value = cpu
        for k, v in (props or {}).items():
            e.properties[k].CopyFrom(v)
        pairs = [(self.s.get_artifacts_by_id([aid])[0], pb.Event(type=pb.Event.INPUT, path=path))
                 for aid, path in inputs]
        pairs += [(a, pb.Event(type=t, path=path)) for a, path, t in outputs]
        eid, aids, _ = self.s.put_execution(e, pairs, self.s.get_contexts_by_id(list(ctxs)))
        aids = aids[len(inputs):]  # the outputs' ids
        self.tick()
        return eid, aids

    @staticmethod
    def path(*steps):
        p = pb.Event.Path()
        for x in steps:
            if isinstance(x, int):
                p.steps.add().index = x
            else:
                p.steps.add().key = x
        return p

    def run(self, run_no, pushed):
        s = self.s
        rc = pb.Context(type_id=self.t_run, name=f"lib-pipe.run-{run_no}")
        rc.properties["run_no"].int_value = run_no
        [rid] = s.put_contexts([rc])
        s.put_parent_contexts([pb.ParentContext(child_id=rid, parent_id=self.pipe)])
        ctxs = (self.pipe, rid)
        ex = pb.Artifact(type_id=self.t_ex, uri=f"/ex/{run_no}", state=pb.Artifact.LIVE, name=f"ex-{run_no}")
        ex.properties["span"].int_value = run_no
        ex.properties["split_names"].string_value = '["train","eval"]'
        _, [ex_id] = self.put_exec(self.t_gen, pb.Execution.COMPLETE, 10.0 * run_no, ctxs,
                                   outputs=[(ex, self.path("examples", 0), pb.Event.OUTPUT)])
        st_art = pb.Artifact(type_id=self.t_stats, uri=f"/st/{run_no}", state=pb.Artifact.LIVE)
        self.put_exec(self.t_statgen, pb.Execution.CACHED if run_no == 2 else pb.Execution.COMPLETE, 2.0, ctxs,
                      inputs=[(ex_id, self.path("examples", 0))],
                      outputs=[(st_art, self.path("statistics", 0, "train"), pb.Event.OUTPUT)])
        props = {}
        for k, v in (("train_steps", pb.Value(int_value=100 * run_no)), ("lr", pb.Value(double_value=0.01)),
                     ("module_file", pb.Value(string_value="m.py")), ("warm", pb.Value(bool_value=True))):
            props[k] = v
        cfg = pb.Value()
        cfg.struct_value.update({"layers": [64, 32], "opt": {"name": "adam"}})
        props["cfg"] = cfg
        props["blob"] = pb.Value(proto_value=any_of(pb.Artifact(uri=f"/warm/{run_no}")))
        model = pb.Artifact(type_id=self.t_model, uri=f"/model/{run_no}", state=pb.Artifact.LIVE)
        # Run 2's trainer has no cpu_seconds: its cost is its wall time, the library's update minus create.
        tr, [m_id] = self.put_exec(self.t_trainer, pb.Execution.RUNNING if run_no == 2 else pb.Execution.COMPLETE,
                                   None if run_no == 2 else 100.0 * run_no, ctxs,
                                   inputs=[(ex_id, self.path("examples", 0))],
                                   outputs=[(model, self.path("model", 0), pb.Event.OUTPUT)], props=props)
        if run_no == 2:
            time.sleep(0.05)
            [e] = s.get_executions_by_id([tr])
            e.last_known_state = pb.Execution.COMPLETE
            s.put_executions([e])
        bless = pb.Artifact(type_id=self.t_bless, uri=f"/bless/{run_no}", state=pb.Artifact.LIVE)
        bless.custom_properties["blessed"].int_value = pushed
        self.put_exec(self.t_eval, pb.Execution.COMPLETE, 5.0, ctxs, inputs=[(m_id, self.path("model", 0))],
                      outputs=[(bless, self.path("blessing", 0), pb.Event.OUTPUT)])
        pm = pb.Artifact(type_id=self.t_pushed, uri=f"/serving/{run_no}", state=pb.Artifact.LIVE)
        pm.custom_properties["pushed"].int_value = pushed
        self.put_exec(self.t_push, pb.Execution.COMPLETE, 1.0, ctxs,
                      inputs=[(m_id, self.path("model", 0))],
                      outputs=[(pm, self.path("pushed_model", 0), pb.Event.OUTPUT)])

    # ---- answers from the library's own queries

    def ctx_of(self, eid, type_id):
        return [c for c in self.s.get_contexts_by_execution(eid) if c.type_id == type_id]

    def cost(self, e):
        if "cpu_seconds" in e.custom_properties:
            return e.custom_properties["cpu_seconds"].double_value
        return (e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000.0

    def graphlets(self):
        """Per trainer: its run's executions that read its outputs (transitively), the producers of its inputs, and
        whether a PushedModel downstream has pushed = 1."""
        s = self.s
        execs = {e.id: e for e in s.get_executions()}
        out = {}
        for t in s.get_executions_by_type("tfx.components.trainer.component.Trainer"):
            [run] = self.ctx_of(t.id, self.t_run)
            in_run = {e.id for e in s.get_executions_by_context(run.id)}
            down, frontier = [], [t.id]
            pushed = False
            while frontier:
                evs = s.get_events_by_execution_ids(frontier)
                made = [ev.artifact_id for ev in evs if ev.type == pb.Event.OUTPUT]
                for a in s.get_artifacts_by_id(made):
                    if a.type_id == self.t_pushed and a.custom_properties["pushed"].int_value == 1:
                        pushed = True
                readers = sorted({ev.execution_id for ev in s.get_events_by_artifact_ids(made)
                                  if ev.type == pb.Event.INPUT and ev.execution_id in in_run})
                frontier = [x for x in readers if x not in down and x != t.id]
                down += frontier
            up = set()
            ins = [ev.artifact_id for ev in s.get_events_by_execution_ids([t.id]) if ev.type == pb.Event.INPUT]
            up |= {ev.execution_id for ev in s.get_events_by_artifact_ids(ins) if ev.type == pb.Event.OUTPUT}
            # and the run's executions that started before the trainer
            up |= {x for x in in_run if x != t.id and x not in down and
                   (execs[x].create_time_since_epoch, x) < (t.create_time_since_epoch, t.id)}
            [pipe] = self.ctx_of(t.id, self.t_pipe)
            spans = sorted({a.properties["span"].int_value for a in s.get_artifacts_by_id(ins)
                            if a.type_id == self.t_ex})
            out[t.id] = {"pipeline": pipe.name, "pushed": pushed, "upstream": up, "downstream": set(down),
                         "spans": spans, "cost": sum(self.cost(execs[x]) for x in up | set(down) | {t.id})}
        return out


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def lib_store(request, tmp_path_factory):
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("mlmd") / "lib.sqlite"
    else:
        path = request.getfixturevalue("pg")()
    return path, Library(path)


def test_library_store_lists_as_the_library_reads_it(cli, lib_store):
    path, lib = lib_store
    s = lib.s
    types = {t["name"]: t for t in cli_json(cli, "prov", "ls", path, "types")}
    for kind, got in (("execution", s.get_execution_types()), ("artifact", s.get_artifact_types()),
                      ("context", s.get_context_types())):
        for t in got:
            mine = types[t.name]
            assert mine["id"] == t.id and mine["kind"] == kind, t.name
            assert mine["properties"] == {k: int(v) for k, v in t.properties.items()}, t.name
            base = t.DESCRIPTOR.fields_by_name["base_type"].enum_type.values_by_number[t.base_type] \
                if t.HasField("base_type") else None
            want = base.GetOptions().Extensions[pb.system_type_extension].type_name if base else None
            assert mine["base_type"] == want, t.name
    # The library's get_*_types leave out its own simple types (mlmd.Dataset ...); sluice lists them.
    assert len([t for t in types if not t.startswith("mlmd.")]) == \
        len(s.get_execution_types()) + len(s.get_artifact_types()) + len(s.get_context_types())

    for kind, got, states in (("executions", s.get_executions(), EXEC_STATES), ("artifacts", s.get_artifacts(),
                                                                               ART_STATES)):
        mine = {n["id"]: n for n in cli_json(cli, "prov", "ls", path, kind)["nodes"]}
        assert sorted(mine) == sorted(n.id for n in got), kind
        for n in got:
            m = mine[n.id]
            assert m["type"] == n.type and m["type_id"] == n.type_id
            assert m.get("name") == (n.name or None)
            assert m["state"] == states[n.last_known_state if kind == "executions" else n.state]
            assert m["create_time_since_epoch"] == n.create_time_since_epoch
            assert m["last_update_time_since_epoch"] == n.last_update_time_since_epoch
            if kind == "artifacts":
                assert m["uri"] == n.uri
            same_props(m["properties"], n.properties)
            same_props(m["custom_properties"], n.custom_properties)
    assert {EXEC_STATES[e.last_known_state] for e in s.get_executions()} == set(EXEC_STATES.values())
    assert {ART_STATES[a.state] for a in s.get_artifacts()} == set(ART_STATES.values())

    mine = {n["id"]: n for n in cli_json(cli, "prov", "ls", path, "contexts")["nodes"]}
    assert sorted(mine) == sorted(c.id for c in s.get_contexts())
    for c in s.get_contexts():
        assert mine[c.id]["name"] == c.name and mine[c.id]["type"] == c.type
        same_props(mine[c.id]["properties"], c.properties)
        same_props(mine[c.id]["custom_properties"], c.custom_properties)
    # parent contexts: the runs are children of the pipeline
    kids = cli_json(cli, "prov", "ls", path, "contexts", "--context", lib.pipe)["nodes"]
    assert sorted(k["id"] for k in kids) == sorted(c.id for c in s.get_children_contexts_by_context(lib.pipe))


def contexts_of(s, eid):
    try:
        return s.get_contexts_by_execution(eid)
    except Exception as e:  # the library's NotFoundError when there is none
        if type(e).__name__ != "NotFoundError":
            raise
        return []


def path_text(p):
    return ":".join(str(x.index) if x.WhichOneof("value") == "index" else x.key for x in p.steps) or None


def test_library_store_shows_events_paths_and_memberships(cli, lib_store):
    path, lib = lib_store
    s = lib.s
    for e in s.get_executions():
        shown = cli_json(cli, "prov", "show", path, f"e:{e.id}")
        want = sorted((ev.artifact_id, EVENT_TYPES[ev.type], path_text(ev.path), ev.milliseconds_since_epoch)
                      for ev in s.get_events_by_execution_ids([e.id]))
        got = sorted((ev["artifact_id"], ev["type"], ev["path"], ev["milliseconds_since_epoch"])
                     for ev in shown["events"])
        assert got == want, e.id
        ctx = sorted(n["id"] for n in shown["nodes"] if n["kind"] == "context")
        assert ctx == sorted(c.id for c in contexts_of(s, e.id)), e.id
    # a multi-step path (key, index, key) is there
    assert any(ev["path"] == "statistics:0:train" for ev in
               cli_json(cli, "prov", "show", path, f"e:{lib.s.get_executions_by_type('StatisticsGen')[0].id}")["events"])
    for c in s.get_contexts():
        arts = cli_json(cli, "prov", "ls", path, "artifacts", "--context", c.id)["nodes"]
        assert sorted(a["id"] for a in arts) == sorted(a.id for a in s.get_artifacts_by_context(c.id)), c.name
        execs = cli_json(cli, "prov", "ls", path, "executions", "--context", c.id)["nodes"]
        assert sorted(x["id"] for x in execs) == sorted(x.id for x in s.get_executions_by_context(c.id)), c.name


def test_library_store_graphlets_and_waste(cli, lib_store):
    path, lib = lib_store
    want = lib.graphlets()
    got = cli_json(cli, "prov", "graphlets", path)
    assert got["count"] == len(want) == 3
    assert got["cost_basis"] == "mixed"  # run 2's trainer has no cpu_seconds
    for g in got["graphlets"]:
        w = want[g["trainer"]]
        assert g["pipeline"] == w["pipeline"]
        assert g["pushed"] == w["pushed"], g
        assert set(g["upstream"]) == w["upstream"], g
        assert set(g["downstream"]) == w["downstream"], g
        assert g["spans"] == w["spans"]
        assert g["cost"] == pytest.approx(w["cost"], rel=1e-4)
    assert [w["pushed"] for _, w in sorted(want.items())] == [True, False, True]

    waste = cli_json(cli, "prov", "waste", path)
    execs = lib.s.get_executions()
    in_graphlet = set()
    wasted = 0.0
    for w in want.values():
        members = w["upstream"] | w["downstream"]
        in_graphlet |= members | {t for t in want if want[t] is w}
    pushed_members = set()
    for t, w in want.items():
        if w["pushed"]:
            pushed_members |= w["upstream"] | w["downstream"] | {t}
    for e in execs:
        if e.id not in pushed_members:
            wasted += lib.cost(e)
    loose = sum(lib.cost(e) for e in execs if e.id not in in_graphlet)
    assert waste["total"] == pytest.approx(sum(lib.cost(e) for e in execs), rel=1e-4)
    assert waste["wasted"] == pytest.approx(wasted, rel=1e-4)
    assert waste["in_no_graphlet"] == pytest.approx(loose, rel=1e-4)
    assert loose > 0 and wasted > loose


def test_library_store_exports_and_reads_only(cli, lib_store, tmp_path):
    path, lib = lib_store
    doc = cli_json(cli, "prov", "export", path)  # every node and event, through sluice's reader
    assert doc
    if str(path).startswith("postgresql://"):
        return
    # A copy in a read-only directory opens in sluice and in the library's READONLY mode.
    d = tmp_path / "ro"
    d.mkdir()
    (d / "lib.sqlite").write_bytes(path.read_bytes())
    os.chmod(d / "lib.sqlite", 0o444)
    ro = connect(d / "lib.sqlite", pb.SqliteMetadataSourceConfig.READONLY)
    assert len(ro.get_executions()) == len(lib.s.get_executions())
    assert len(cli_json(cli, "prov", "ls", d / "lib.sqlite", "executions")["nodes"]) == len(ro.get_executions())


# ---- direction (b): what sluice writes, read by the library

def sluice_nodes(cli, path, kind):
    return {n["id"]: n for n in cli_json(cli, "prov", "ls", path, kind)["nodes"]}


def check_library_reads(cli, path, mode=pb.SqliteMetadataSourceConfig.READONLY):
    """The library opens the store (read-only: it may not need to write anything to do so) and its executions,
    artifacts, contexts, events and types are what `sluice prov` says sluice wrote."""
    s = connect(path, mode)
    for kind, got, states in (("executions", s.get_executions(), EXEC_STATES),
                              ("artifacts", s.get_artifacts(), ART_STATES)):
        mine = sluice_nodes(cli, path, kind)
        assert sorted(mine) == sorted(n.id for n in got), kind
        for n in got:
            m = mine[n.id]
            assert n.type == m["type"] and n.type_id == m["type_id"]
            assert (n.name or None) == m.get("name")
            assert states[n.last_known_state if kind == "executions" else n.state] == m["state"]
            assert n.create_time_since_epoch == m["create_time_since_epoch"]
            assert n.last_update_time_since_epoch == m["last_update_time_since_epoch"]
            if kind == "artifacts":
                assert n.uri == m["uri"]
            same_props(m["properties"], n.properties)
            same_props(m["custom_properties"], n.custom_properties)
    mine = sluice_nodes(cli, path, "contexts")
    assert sorted(mine) == sorted(c.id for c in s.get_contexts())
    for c in s.get_contexts():
        assert c.name == mine[c.id]["name"] and c.type == mine[c.id]["type"]
        same_props(mine[c.id]["properties"], c.properties)
        same_props(mine[c.id]["custom_properties"], c.custom_properties)
        parents = [p.id for p in s.get_parent_contexts_by_context(c.id)]
        for p in parents:
            assert c.id in [k["id"] for k in cli_json(cli, "prov", "ls", path, "contexts", "--context", p)["nodes"]]
    execs = s.get_executions()
    evs = s.get_events_by_execution_ids([e.id for e in execs])
    for e in execs:
        shown = cli_json(cli, "prov", "show", path, f"e:{e.id}")
        got = sorted((ev["artifact_id"], ev["type"], ev["path"], ev["milliseconds_since_epoch"])
                     for ev in shown["events"])
        want = sorted((ev.artifact_id, EVENT_TYPES[ev.type], path_text(ev.path), ev.milliseconds_since_epoch)
                      for ev in evs if ev.execution_id == e.id)
        assert got == want, e.id
    types = {t["name"]: t for t in cli_json(cli, "prov", "ls", path, "types")}
    lib_types = s.get_execution_types() + s.get_artifact_types() + s.get_context_types()
    assert sorted(t.name for t in lib_types) == sorted(t for t in types if not t.startswith("mlmd."))
    for t in lib_types:
        assert {k: int(v) for k, v in t.properties.items()} == types[t.name]["properties"], t.name
    return s


SIMPLE_TYPES = [("mlmd.Dataset", 1), ("mlmd.Model", 1), ("mlmd.Metrics", 1), ("mlmd.Statistics", 1),
                ("mlmd.Train", 0), ("mlmd.Transform", 0), ("mlmd.Process", 0), ("mlmd.Evaluate", 0),
                ("mlmd.Deploy", 0)]


def test_prov_init_on_postgresql_is_the_librarys_schema(cli, pg):
    """Tables, columns, indexes, constraint names and the library's simple types as the library creates them on
    PostgreSQL; int_value is BIGINT where the library's is INTEGER (sluice records values beyond 32 bits)."""
    mine, lib = pg(), pg()
    run_cli(cli, "prov", "init", mine)
    connect(lib)
    check_library_reads(cli, mine)

    def q(uri, sql):
        return subprocess.run([pg.psql, uri, "-Atc", sql], check=True, capture_output=True, text=True).stdout

    cols = ("SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY 1, 2")
    idx = "SELECT indexname, replace(indexdef, 'public.', '') FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
    types = "SELECT id, name, type_kind FROM type ORDER BY id"
    assert q(mine, cols).replace("|int_value|bigint|", "|int_value|integer|") == q(lib, cols)
    assert q(mine, idx) == q(lib, idx)
    assert q(mine, types) == q(lib, types)
    assert q(mine, types).split() == [f"{i + 1}|{n}|{k}" for i, (n, k) in enumerate(SIMPLE_TYPES)]


def test_prov_init_opens_read_only_in_the_library(cli, tmp_path):
    db = tmp_path / "init.sqlite"
    run_cli(cli, "prov", "init", db)
    check_library_reads(cli, db)  # READONLY: the library would fail if it had to add its simple types
    con = sqlite3.connect(db)
    names = sorted(r for r in con.execute("SELECT name, type_kind FROM Type"))
    con.close()
    assert names == sorted(SIMPLE_TYPES)
    # the same bytes as a store the library creates: table for table, the schema sluice wrote is the library's
    lib_db = tmp_path / "libinit.sqlite"
    connect(lib_db)

    def schema(p):
        con = sqlite3.connect(p)
        rows = con.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
        con.close()
        return sorted(rows)
    assert schema(db) == schema(lib_db)


def test_prov_gen_opens_in_the_library(cli, new_store):
    db = new_store()
    run_cli(cli, "prov", "gen", db, "--pipelines", 2, "--days", 3, "--seed", 5)
    s = check_library_reads(cli, db)
    assert len(s.get_executions()) > 20


def test_recorded_runs_open_in_the_library_and_its_writes_in_sluice(cli, data, tmp_path, new_store):
    from conftest import image_spec, spec_file
    db = new_store()
    spec = spec_file(tmp_path, image_spec(data, decode=False))
    run_cli(cli, "run", spec, "--record", db, "--quiet")
    run_cli(cli, "optimize", spec, "--seconds", "0.5", "--record", db, "-o", tmp_path / "tuned.json")
    import sluice.prov
    with sluice.prov.Store(str(db)).record_run("py-pipe", inputs=[str(spec)]) as r:
        r.produced(str(spec), type="Model")
    s = check_library_reads(cli, db)
    kinds = {e.type for e in s.get_executions()}
    assert {"sluice.Run", "sluice.Optimize", "sluice.Train"} <= kinds, kinds

    # The library's put_* into sluice's store: a new type with properties, an execution with events and a context;
    # then sluice reads the mixed store.
    w = connect(db, pb.SqliteMetadataSourceConfig.READWRITE)
    et = pb.ExecutionType(name="LibStep", base_type=pb.ExecutionType.PROCESS)
    et.properties["n"] = pb.INT
    tid = w.put_execution_type(et)
    run_ctx = [c for c in w.get_contexts() if c.type == "pipeline_run"][0]
    e = pb.Execution(type_id=tid, last_known_state=pb.Execution.COMPLETE)
    e.properties["n"].int_value = 3
    set_all_values(e.custom_properties, 4)
    a = pb.Artifact(type_id=w.get_artifact_type("sluice.Data").id, uri="/lib/out", state=pb.Artifact.LIVE)
    src = w.get_artifacts()[0]
    eid, [_, aid], _ = w.put_execution(
        e, [(src, pb.Event(type=pb.Event.INPUT, path=Library.path("in", 0))),
            (a, pb.Event(type=pb.Event.OUTPUT, path=Library.path("out", 1, "x")))], [run_ctx])
    check_library_reads(cli, db)
    shown = cli_json(cli, "prov", "show", db, f"e:{eid}")
    assert shown["nodes"][0]["type"] == "LibStep" and shown["nodes"][0]["properties"] == {"n": 3}
    assert any(n["id"] == run_ctx.id for n in shown["nodes"] if n["kind"] == "context")
    lineage = cli_json(cli, "prov", "lineage", db, f"a:{aid}", "--up")
    assert eid in [n["id"] for n in lineage["nodes"] if n["kind"] == "execution"]
    # and sluice records on into the mixed store, which the library still reads
    run_cli(cli, "run", spec, "--record", db, "--quiet")
    check_library_reads(cli, db)
    assert run_cli(cli, "prov", "fleet", db).returncode == 0


# ---- schema versions

def test_schema_versions(cli, tmp_path):
    """The library's schema version is sluice's (10). Another one is refused, naming both, by reading and writing
    commands alike, and nothing is migrated silently: a store the library downgraded to 9 is refused until the
    library upgrades it (on request), and a version newer than 10 is refused by sluice as by the library."""
    db = tmp_path / "v.sqlite"
    s = connect(db)
    t = s.put_execution_type(pb.ExecutionType(name="Step"))
    [eid] = s.put_executions([pb.Execution(type_id=t, last_known_state=pb.Execution.COMPLETE)])
    del s
    con = sqlite3.connect(db)
    assert con.execute("SELECT schema_version FROM MLMDEnv").fetchall() == [(10,)]  # the library's version
    con.close()

    def version():
        con = sqlite3.connect(db)
        v = con.execute("SELECT schema_version FROM MLMDEnv").fetchall()
        con.close()
        return v

    def refused(v, why):
        for args in (("prov", "ls", db, "executions"), ("prov", "init", db)):  # reading, and writing
            r = run_cli(cli, *args, check=False)
            assert r.returncode != 0
            assert f"MLMD schema version {v} found" in r.stderr and "version 10" in r.stderr, r.stderr
            assert why in r.stderr, r.stderr
        assert version() == [(v,)]  # nothing was migrated

    c = pb.ConnectionConfig()
    c.sqlite.filename_uri = str(db)
    c.sqlite.connection_mode = pb.SqliteMetadataSourceConfig.READWRITE
    metadata_store.downgrade_schema(c, downgrade_to_schema_version=9)
    refused(9, "enable_upgrade_migration")
    with pytest.raises(Exception):
        metadata_store.MetadataStore(c)  # the library does not upgrade it unasked either
    metadata_store.MetadataStore(c, enable_upgrade_migration=True)
    assert version() == [(10,)]
    assert [n["id"] for n in cli_json(cli, "prov", "ls", db, "executions")["nodes"]] == [eid]

    con = sqlite3.connect(db)
    con.execute("UPDATE MLMDEnv SET schema_version = 11")
    con.commit()
    con.close()
    refused(11, "newer ml-metadata")
    with pytest.raises(Exception, match="version 11 is greater than library version 10"):
        connect(db)

def test_sluice_struct_and_proto_values_read_by_the_library(cli, tmp_path, new_store):
    """STRUCT and PROTO values written through sluice's C API (libsluice.so, by ctypes) are the library's
    struct_value and proto_value, and the library's own come back through the API unchanged."""
    import ctypes
    so = os.path.join(os.path.dirname(cli), "libsluice.so")
    if not os.path.exists(so):
        pytest.skip(f"no {so}")
    L = ctypes.CDLL(so)

    class Value(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("i", ctypes.c_int64), ("d", ctypes.c_double), ("s", ctypes.c_char_p),
                    ("bytes", ctypes.c_char_p), ("len", ctypes.c_size_t)]

    class TypeProp(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_int)]

    L.sl_error_last.restype = ctypes.c_char_p
    db = new_store()
    p = ctypes.c_void_p()

    def ok(rc):
        assert rc == 0, L.sl_error_last()
    ok(L.sl_prov_open(ctypes.byref(p), str(db).encode(), 1))
    props = (TypeProp * 2)(TypeProp(b"st", 4), TypeProp(b"pr", 5))
    tid, aid = ctypes.c_int64(), ctypes.c_int64()
    ok(L.sl_prov_put_type(ctypes.byref(tid), p, 1, b"Blob", props, 2, b"mlmd.Dataset"))
    ok(L.sl_prov_put_artifact(ctypes.byref(aid), p, tid, b"/blob", None, 2, ctypes.c_int64(0)))
    doc = {"layers": [64, 32], "opt": {"name": "adam", "lr": 0.001}, "ok": True, "none": None, "s": "\u00fc"}
    packed = any_of(pb.Artifact(uri="/inner", name="n")).SerializeToString()
    for name, custom, v in ((b"st", False, Value(4, 0, 0, json.dumps(doc).encode(), None, 0)),
                            (b"pr", False, Value(5, 0, 0, None, packed, len(packed))),
                            (b"cst", True, Value(4, 0, 0, b"{}", None, 0))):
        ok(L.sl_prov_set_property(p, 1, aid, name, custom, ctypes.byref(v)))
    # bytes that are not an Any would make the node unreadable in the library: refused
    raw = Value(5, 0, 0, None, b"\x00\x01\xff", 3)
    assert L.sl_prov_set_property(p, 1, aid, b"craw", True, ctypes.byref(raw)) != 0
    assert b"'craw'" in L.sl_error_last()
    L.sl_prov_close(p)

    s = connect(db, pb.SqliteMetadataSourceConfig.READONLY)
    [a] = s.get_artifacts_by_id([aid.value])
    from google.protobuf.json_format import MessageToDict
    assert MessageToDict(a.properties["st"].struct_value) == doc
    assert a.properties["pr"].proto_value.SerializeToString() == packed
    assert MessageToDict(a.custom_properties["cst"].struct_value) == {}
    check_library_reads(cli, db)
    # and sluice reads back what it wrote: the JSON text (integers as integers) and the bytes
    shown = cli_json(cli, "prov", "show", db, f"a:{aid.value}")["nodes"][0]
    assert json.loads(shown["properties"]["st"]) == doc
    assert base64.b64decode(shown["properties"]["pr"]["base64"]) == packed
    assert "craw" not in shown["custom_properties"]


def test_recording_into_the_librarys_postgresql_store(cli, data, tmp_path, pg):
    """The library's PostgreSQL schema has INTEGER int_value columns (1.17.1: it cannot store its own int64
    values there). sluice refuses a value beyond 32 bits naming the property and the fix, and widens the columns
    only when told to (`prov init --widen-ints`); then it records, and the library reads and writes the store."""
    from conftest import image_spec, spec_file
    db = pg()
    s = connect(db)
    tid = s.put_artifact_type(pb.ArtifactType(name="Big"))
    big = pb.Artifact(type_id=tid, uri="/big")
    big.custom_properties["n"].int_value = 2 ** 40
    with pytest.raises(Exception, match="out of range"):
        s.put_artifacts([big])  # the library's own limit on its schema
    spec = spec_file(tmp_path, image_spec(data, decode=False))
    r = run_cli(cli, "run", spec, "--record", db, "--quiet", check=False)
    assert r.returncode != 0
    assert "property 'mtime'" in r.stderr and "--widen-ints" in r.stderr, r.stderr
    out = cli_json(cli, "prov", "init", db, "--widen-ints")
    assert out["widened_ints"] is True
    assert cli_json(cli, "prov", "init", db, "--widen-ints")["widened_ints"] is False  # once
    run_cli(cli, "run", spec, "--record", db, "--quiet")
    s = check_library_reads(cli, db)
    [aid] = connect(db).put_artifacts([big])
    assert cli_json(cli, "prov", "show", db, f"a:{aid}")["nodes"][0]["custom_properties"] == {"n": 2 ** 40}
