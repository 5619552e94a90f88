# test_state.py: a run's saved position from Python: run.state() / Pipeline.iter(state=...) continue exactly (in a
# new process too), through Python map functions (random ones made again with their seeds), shuffles, parallel maps
# and prefetch; sluice.torch.Dataset's state_dict() / load_state_dict() (torchdata's StatefulDataLoader protocol)
# and set_epoch(); bad states raise sluice.Error saying why.
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import sluice


def jitter(e, rng):
    return {**e, "noise": np.float64(rng.normal())}


sluice.register_fn("t_state_jitter", jitter, random=True)

SPEC = {"name": "st", "seed": 11, "ops": [
    {"op": "range", "stop": 90},
    {"op": "shuffle", "buffer": 16},
    {"op": "map", "fn": "t_state_jitter", "parallelism": 2},
    {"op": "batch", "size": 4},
    {"op": "prefetch", "buffer": 3}]}


def rows(it, n=None):
    out = []
    for e in it:
        out.append((e["value"].tolist(), e["noise"].tolist()))
        if n is not None and len(out) == n:
            break
    return out


@pytest.mark.parametrize("cut", [0, 1, 7, 22, 23])
def test_resume_in_process_is_exact(cut):
    full = rows(sluice.Pipeline(SPEC))
    p = sluice.Pipeline(SPEC)
    run = iter(p)
    head = rows(run, cut) if cut else []
    st = run.state()
    assert isinstance(st, bytes) and len(st) < 64 * 1024
    run.close()
    assert head + rows(sluice.Pipeline(SPEC).iter(state=st)) == full


def test_resume_in_a_new_process(tmp_path):
    p = sluice.Pipeline(SPEC)
    full = rows(sluice.Pipeline(SPEC))
    run = iter(p)
    head = rows(run, 9)
    (tmp_path / "st").write_bytes(run.state())
    run.close()
    code = (
        "import json, sys, numpy as np, sluice\n"
        "sluice.register_fn('t_state_jitter', lambda e, rng: {**e, 'noise': np.float64(rng.normal())}, random=True)\n"
        f"p = sluice.Pipeline(json.loads({json.dumps(json.dumps(SPEC))}))\n"
        f"it = p.iter(state=open({str(tmp_path / 'st')!r}, 'rb').read())\n"
        "print(json.dumps([(e['value'].tolist(), e['noise'].tolist()) for e in it]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rest = [tuple(r) for r in json.loads(out.stdout)]
    assert head + rest == full


def test_bad_states_say_why():
    p = sluice.Pipeline(SPEC)
    run = iter(p)
    next(run)
    st = run.state()
    run.close()
    with pytest.raises(sluice.Error, match="checksum|truncated"):
        p.iter(state=st[: len(st) // 2])
    other = dict(SPEC, ops=SPEC["ops"][:3] + [{"op": "batch", "size": 5}] + SPEC["ops"][4:])
    with pytest.raises(sluice.Error, match=r"ops\[3\]"):
        sluice.Pipeline(other).iter(state=st)
    with pytest.raises(sluice.Error, match="not a sluice state"):
        p.iter(state=b"hello")


def test_state_after_the_end_is_refused():
    run = iter(sluice.Pipeline(SPEC))
    rows(run)
    with pytest.raises(sluice.Error, match="ended"):
        run.state()


torch = pytest.importorskip("torch")
import sluice.torch  # noqa: E402


def batches(loader, n=None):
    out = []
    for b in loader:
        out.append(b["value"].tolist())
        if n is not None and len(out) == n:
            break
    return out


def test_torch_state_dict_resumes_mid_epoch():
    mk = lambda: torch.utils.data.DataLoader(sluice.torch.Dataset(SPEC), batch_size=None, num_workers=0)  # noqa: E731
    full = batches(mk())
    ds = sluice.torch.Dataset(SPEC)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    it = iter(loader)
    head = [next(it)["value"].tolist() for _ in range(5)]
    sd = ds.state_dict()
    assert sd["epoch"] == 1 and isinstance(sd["state"], bytes)
    del it
    ds2 = sluice.torch.Dataset(SPEC)
    ds2.load_state_dict(sd)
    rest = batches(torch.utils.data.DataLoader(ds2, batch_size=None, num_workers=0))
    assert head + rest == full
    assert ds2.state_dict()["state"] is None  # between iterations


def test_torch_set_epoch_gives_that_epochs_order():
    ds = sluice.torch.Dataset(SPEC)
    epochs = [batches(ds) for _ in range(4)]
    assert epochs[0] != epochs[3]
    ds2 = sluice.torch.Dataset(SPEC)
    ds2.set_epoch(3)
    assert batches(ds2) == epochs[3]
    with pytest.raises(TypeError):
        ds2.set_epoch(-1)


def test_torchdata_stateful_dataloader():
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError as e:
        if os.environ.get("SLUICE_TORCH2_REQUIRED"):  # make test-python-torch2 installs it
            raise
        pytest.skip(f"torchdata's StatefulDataLoader is not importable ({e}); it needs torch >= 2.3, this is "
                    f"{torch.__version__} (make test-python-torch2 runs it with torch 2)")
    full = batches(StatefulDataLoader(sluice.torch.Dataset(SPEC), batch_size=None, num_workers=0))
    dl = StatefulDataLoader(sluice.torch.Dataset(SPEC), batch_size=None, num_workers=0)
    it = iter(dl)
    head = [next(it)["value"].tolist() for _ in range(6)]
    sd = dl.state_dict()
    dl2 = StatefulDataLoader(sluice.torch.Dataset(SPEC), batch_size=None, num_workers=0)
    dl2.load_state_dict(sd)
    assert head + batches(dl2) == full


def test_torch_len_when_known_and_why_not(data):
    ds = sluice.torch.Dataset(SPEC)
    assert len(ds) == 23  # 90 elements in batches of 4
    with pytest.raises(TypeError, match="not known before reading the data"):
        len(sluice.torch.Dataset({"ops": [{"op": "files", "glob": str(data / "img" / "*.tfrecord")},
                                          {"op": "tfrecord"}]}))
    with pytest.raises(TypeError, match="forever"):
        len(sluice.torch.Dataset({"ops": [{"op": "range", "stop": 3}, {"op": "repeat"}]}))


def test_ranks_in_step_yield_equal_batches(monkeypatch):
    def fail_some(e):
        if int(e["value"]) % 4 == 0:
            raise ValueError("planted")
        return e
    sluice.register_fn("t_state_fail", fail_some)
    counts, values = [], []
    for rank in range(2):
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", str(rank))
        spec = {"seed": 1, "ops": [{"op": "range", "stop": 29},
                                   {"op": "shard", "num_shards": "auto", "index": "auto"},
                                   {"op": "map", "fn": "t_state_fail", "on_error": "skip"},
                                   {"op": "batch", "size": 3}]}
        ds = sluice.torch.Dataset(spec)
        got = [b["value"].tolist() for b in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)]
        counts.append(len(got))
        assert len(ds) == len(got)
        values += [v for b in got for v in b]
        filled = [st["filled"] for st in ds.pipeline.stats() if st["op"] == "map"][0]
        assert filled > 0
    assert counts[0] == counts[1] == 5
    assert {v for v in range(29) if v % 4} <= set(values)


def test_state_of_a_tuned_run_restores_on_the_plain_spec():
    spec = {"name": "tuned", "seed": 5, "ops": [
        {"op": "range", "stop": 3000},
        {"op": "shuffle", "buffer": 64},
        {"op": "map", "fn": "t_state_jitter", "parallelism": "autotune"},
        {"op": "batch", "size": 8},
        {"op": "prefetch", "buffer": "autotune"}]}
    full = rows(sluice.Pipeline(spec))
    p = sluice.Pipeline(spec, tune={"interval": 0.05})
    run = iter(p)
    head = rows(run, 200)
    st = run.state()
    run.close()
    assert head + rows(sluice.Pipeline(spec).iter(state=st)) == full
