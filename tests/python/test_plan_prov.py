# test_plan_prov.py: stats, to_json, validate, optimize and report on a pipeline; sluice.prov: recording a
# training run, and should_train agreeing with `sluice prov should-train`.
import json
import subprocess

import pytest

import sluice
import sluice.prov
from conftest import run_cli


def small():
    return {"name": "small", "seed": 1, "ops": [
        {"op": "range", "stop": 2000},
        {"op": "map", "fn": "spin", "args": {"us": 20}, "parallelism": "autotune"},
        {"op": "batch", "size": 10},
        {"op": "prefetch", "buffer": "autotune"}]}


def test_stats_to_json_validate():
    p = sluice.Pipeline(small())
    assert len(list(p)) == 200
    st = p.stats()
    assert [s["op"] for s in st] == ["range", "map", "batch", "prefetch"]
    assert st[0]["elements_out"] == 2000 and st[2]["elements_out"] == 200 and st[1]["path"] == "ops[1]"
    # waiting for a core: part of the op's own wall time, or -1 where the kernel does not say
    assert all(s["runq_seconds"] == -1 or 0 <= s["runq_seconds"] <= s["wall_seconds"] + 1e-9 for s in st)
    spec = json.loads(p.to_json())
    assert spec["ops"][1]["parallelism"] == "autotune"
    assert p.validate() == 4
    p.reset_stats()
    assert p.stats()[0]["elements_out"] == 0


def test_stats_count_skipped_errors():
    # a map's "on_error": "skip" drops the elements its function fails on; the stats count them
    p = sluice.Pipeline({"ops": [{"op": "range", "start": -3, "stop": 7},
                                 {"op": "map", "fn": "log1p", "args": {"component": "value", "clip_negative": False},
                                  "on_error": "skip", "parallelism": 2}]})
    with pytest.warns(sluice.SkipWarning, match="skipped 3 element"):
        assert len(list(p)) == 7
    st = p.stats()[1]
    assert st["skipped"] == 3 and st["errors_skipped"] == 3
    assert p.stats()[0]["errors_skipped"] == 0


def test_optimize_plans_the_autotune_knobs():
    p = sluice.Pipeline(small() | {"ops": small()["ops"][:1] + [{"op": "repeat"}] + small()["ops"][1:]})
    summary = p.optimize(seconds=0.5, cores=2, consumer_cores=1)
    assert summary["predicted"] > 0 and summary["bound"] > 0
    # The input's CPU per element in its trace and in the final runs are measured only with measure > 0.
    assert summary["input_cpu_traced"] == 0 and summary["input_cpu_checked"] == 0
    ops = summary["spec"]["ops"]
    spin = [op for op in ops if op.get("fn") == "spin"]
    prefetch = [op for op in ops if op["op"] == "prefetch"]
    assert len(spin) == 1 and isinstance(spin[0]["parallelism"], int)
    # Whether a prefetch stays is the planner's choice (it drops one it finds useless); any that stays is planned.
    assert all(isinstance(op["buffer"], int) for op in prefetch)
    it = iter(p)
    next(it)
    with pytest.raises(sluice.Error, match="live"):
        p.optimize(seconds=0.2)


def test_report_writes_the_html_page(tmp_path):
    p = sluice.Pipeline(small())
    out = p.report(tmp_path / "r.html", seconds=0.3)
    html = open(out).read()
    assert html.startswith("<!DOCTYPE html>") or "<html" in html[:200]


def test_record_run_and_store_errors(tmp_path, cli):
    db = tmp_path / "runs.db"
    store = sluice.prov.Store(db)
    assert store.backend == "sqlite"
    data = tmp_path / "d.txt"
    data.write_text("a\nb\n")
    p = sluice.Pipeline({"name": "lines", "ops": [{"op": "files", "list": [str(data)]}, {"op": "lines"}]})
    with store.record_run(p) as run:
        run.elements = len(list(p))
        run.produced(tmp_path / "model.pt")
    assert run.execution_id > 0
    with pytest.raises(RuntimeError):
        with store.record_run(p) as failed:
            raise RuntimeError("trainer crashed")
    out = run_cli(cli, "prov", "ls", db, "executions", "--json").stdout
    assert "sluice.Train" in out and "trainer crashed" in run_cli(cli, "prov", "show", db,
                                                                 f"e:{failed.execution_id}").stdout
    bad = tmp_path / "not.db"
    bad.write_text("not sqlite at all, not at all" * 100)
    with pytest.raises(sluice.StoreError):
        sluice.prov.Store(bad)


def test_store_never_shows_a_password():
    # issue 34 row 5: repr(Store) and the error of a store that cannot be opened
    secret = "Sekr3tPW9q"
    for uri in (f"postgresql://u:{secret}@127.0.0.1:1/x?connect_timeout=3",
                f"postgresql://u@127.0.0.1:1/x?connect_timeout=3&password={secret}"):
        with pytest.raises(sluice.StoreError) as ei:
            sluice.prov.Store(uri)
        assert secret not in str(ei.value) and "***" in str(ei.value)
        s = sluice.prov.Store.__new__(sluice.prov.Store)  # a Store as __init__ leaves it, without a server
        s.uri = uri
        assert secret not in repr(s) and "127.0.0.1:1" in repr(s)
    # issue 47 row 5: whatever character the password holds, raw or percent-encoded, in the userinfo or the query
    from urllib.parse import quote
    for c in [chr(i) for i in range(32, 127)] + ["\t", "é", "密码"]:
        pw = f"ab{c}{secret}"
        for uri in (f"postgresql://u:{pw}@127.0.0.1:1/x", f"postgresql://u:{quote(pw, safe='')}@127.0.0.1:1/x",
                    f"postgresql://u@127.0.0.1:1/x?password={pw}"):
            with pytest.raises(sluice.StoreError) as ei:
                sluice.prov.Store(uri)
            assert secret not in str(ei.value), (c, str(ei.value))
            s = sluice.prov.Store.__new__(sluice.prov.Store)
            s.uri = uri
            assert secret not in repr(s), (c, repr(s))


def test_should_train_agrees_with_the_cli(tmp_path, cli):
    db = tmp_path / "prov.db"
    run_cli(cli, "prov", "gen", db, "--pipelines", 4, "--days", 30)
    names = [c["name"] for c in json.loads(run_cli(cli, "prov", "ls", db, "contexts", "--type", "pipeline",
                                                   "--json").stdout)["nodes"]]
    assert names
    for name in names:
        decision, probability = sluice.prov.should_train(db, name)
        r = subprocess.run([cli, "prov", "should-train", db, "--pipeline", name], capture_output=True, text=True)
        assert r.returncode == (0 if decision else 10), name
        assert f"P(push) = {probability:.3f}" in r.stdout
    with pytest.raises(sluice.StoreError):
        sluice.prov.should_train(db, "no-such-pipeline")


def test_python_functions_share_one_core_in_the_plan(tmp_path):
    # Python functions run under the GIL: the planner gives them one core together, whatever their parallelism,
    # and the report says so when they are what limits the pipeline.
    def busy(e):
        x = 0
        for i in range(3000):
            x += i * i
        return e
    sluice.register_fn("test_busy", busy)
    p = sluice.Pipeline({"name": "gil", "ops": [
        {"op": "range", "stop": 1000000},
        {"op": "map", "fn": "test_busy", "parallelism": 2},
        {"op": "map", "fn": "spin", "args": {"us": 5}},
        {"op": "prefetch", "buffer": 4}]})
    html = open(p.report(tmp_path / "gil.html", seconds=2.0)).read()  # enough elements on a loaded machine
    assert "GIL" in html
