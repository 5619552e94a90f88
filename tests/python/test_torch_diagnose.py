# test_torch_diagnose.py: sluice.torch.diagnose on planted DataLoaders (issue 39): the named bottleneck is the
# planted one (by construction, not by timing), map-style and iterable datasets with and without workers, the
# traced loop yields what the loader yields, errors and Ctrl-C leave nothing running, a Compose's lambda and custom
# class stay Python steps of the translated spec, which runs; tuned(), to_dict(), save_html() and the CLI.
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")  # the planted loaders' Compose

import sluice  # noqa: E402
import sluice.torch as st  # noqa: E402
from sluice.torch.model import MAX_WORKERS_PER_CORE  # noqa: E402
from conftest import ROOT  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
from torch_planted import Cheap, Samples, Slow, planted, spin  # noqa: E402

SECONDS = 1.0


def diagnose_batches(loader, n=40, **kw):
    """diagnose around a loop of `n` batches after the first (across epochs): a window the planner can name a
    bottleneck in (32 batches) however loaded the machine is, where a window of SECONDS may hold a handful."""
    with st.diagnose(loader, None, check_seconds=0, quiet=True, **kw) as r:
        got = 0
        while got <= n:
            for _ in loader:
                got += 1
                if got > n:
                    break
    return r


def test_slow_step_is_named(nothing_left):
    # Slow costs 15x each Cheap step; two workers on a two-core budget: the workers keep the cores busy, and the
    # step to blame is Slow, with most of the worker CPU.
    r = st.diagnose(planted("slow_step"), seconds=SECONDS, cores=2)
    b = r.to_dict()["bottleneck"]
    assert b["kind"] == "step" and b["step"] == "Slow" and b["step_share"] > 0.5
    assert "Slow" in str(r) and "of worker CPU" in str(r)
    steps = r.to_dict()["measured"]["steps"]
    assert {"Cheap [0]", "Slow", "Cheap [2]", "collate", "__getitem__ (read, decode, rest)"} <= set(steps)


def test_the_trace_is_one_sluice_analyze_reads(cli, tmp_path, nothing_left):
    # report.trace is a sluice trace (docs/trace-format.md): the CLI's analyzer reads it and names the same op.
    r = diagnose_batches(planted("slow_step"), cores=2)
    path = tmp_path / "loader.trace.json"
    path.write_text(json.dumps(r.trace))
    out = subprocess.run([cli, "analyze", str(path), "--cores", "2"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Bottleneck: ops[1] (map workers: dataset[i], transforms, collate, send)" in out.stdout
    with pytest.raises(sluice.Error, match="not a sluice trace"):
        sluice._sluice.analyze_trace("{}")


def test_too_few_workers(nothing_left):
    # One worker process of CPU-heavy samples against a budget of 4 cores: more workers is the fix.
    r = st.diagnose(planted("few_workers"), seconds=SECONDS, cores=4)
    d = r.to_dict()
    assert d["bottleneck"]["kind"] == "too few workers"
    assert d["proposal"]["num_workers"]["value"] > 1 and d["proposal"]["num_workers"]["was"] == 1
    assert d["proposal"]["num_workers"]["predicted"] > d["measured"]["batches_per_s"]
    assert "too few workers" in str(r)


def test_transfer_makes_the_main_process_the_bottleneck(nothing_left):
    # Big numpy batches that cost the workers nothing to make are pickled by value: the main process unpickles them
    # one at a time while four workers pickle them in parallel (with two, pickling and unpickling cost about the same
    # per batch, and the verdict could go either way: "too few workers" was named on an idle machine).
    r = diagnose_batches(planted("transfer", mb=4, workers=4), cores=8)
    d = r.to_dict()
    assert d["bottleneck"]["kind"] == "main process", d["bottleneck"]
    assert "unpickling batches" in d["bottleneck"]["words"] and "shared memory" in d["bottleneck"]["words"]
    assert d["measured"]["main_unpickling"] > 0
    assert d["proposal"]["num_workers"]["value"] <= 2  # more workers cannot help
    # what num_workers=0 would run in the main process besides the samples: the loader's own loop, measured
    assert d["measured"]["loader_loop_cpu_per_batch"] > 0 and d["measured"]["probe_cpu_per_batch"] > 0


def test_without_workers_the_loaders_own_loop_is_priced():
    # A loader whose samples cost little: without workers a batch costs the DataLoader's own loop in the main process
    # (sampler, fetch, iterator), which no worker's figures hold; the probes' CPU in the getitem and collate figures
    # is the tracing's. Per batch here: 10 us of samples and collate, less 1 us of probes, plus a 4 us loop.
    from sluice.torch.model import _Model
    parts = {"__getitem__ (read, decode, rest)": [0.001, 0.001], "collate": [0.0, 0.0]}
    fig = {"batches": 100, "k": 1.0, "parts": dict(parts, **{"send to the main process": [0.5, 0.5]}),
           "work_cpu": 0.501, "work_wall": 0.501, "worker_runq": 0.0, "transfer_cpu": 0.6, "pin_cpu": None,
           "step_wall": None, "step_cpu": None, "loop_cpu": 4e-6, "probe_cpu": 1e-6}
    assert _Model(fig, 2, 2.0).rate(0) == pytest.approx(1 / 13e-6)
    assert _Model(dict(fig, loop_cpu=0.0, probe_cpu=0.0), 2, 2.0).rate(0) == pytest.approx(1 / 10e-6)
    # num_workers=0 as given: the main thread's CPU in next() beyond the samples' (4 us a batch) is that loop already
    fig0 = dict(fig, parts=parts, work_cpu=0.001, work_wall=0.001, transfer_cpu=0.0004)
    assert _Model(fig0, 0, 2.0).rate(0) == pytest.approx(1 / 13e-6)
    # The no-workers probe's CPU and blocked time a batch, where there is one (workers > 0), replace all of that
    probed = {"cpu": 5e-6, "blocked": 1e-6, "batches": 1000}
    assert _Model(dict(fig, no_workers=probed), 2, 2.0).rate(0) == pytest.approx(1 / 6e-6)
    assert _Model(dict(fig0, no_workers=probed), 0, 2.0).rate(0) == pytest.approx(1 / 13e-6)
    # ... and predict num_workers=0 at the probe's own rate, where the model's ratio scales the measured rate for
    # other settings (its error at the loader's own setting would otherwise reach the probed figure)
    m, plain = _Model(dict(fig, no_workers=probed), 2, 2.0), _Model(fig, 2, 2.0)
    assert m.predict(0, 100.0) == m.predict(0, 200.0) == pytest.approx(1 / 6e-6)
    assert plain.predict(0, 100.0) == pytest.approx(100.0 * plain.rate(0) / plain.rate(2, False))
    assert m.predict(1, 100.0) == pytest.approx(100.0 * m.rate(1) / m.rate(2, False))


def test_other_load_shares_the_cores():
    # Beside one process busy on one of two cores, CPU-bound samples (10 ms a batch): without workers the main
    # thread gets a core, 2 workers get their fair share, 2 x 2/3 of the cores (the scheduler shares the cores among
    # runnable threads), not only the one core the other load leaves. Without the other load's figure the model
    # prices both alike (what made diagnose predict 1.02x for 2 workers beside load, which measured 2x).
    from sluice.torch.model import _Model
    fig = {"batches": 100, "k": 1.0, "parts": {"__getitem__ (read, decode, rest)": [1.0, 1.0]}, "work_cpu": 1.0,
           "work_wall": 1.0, "worker_runq": 0.0, "transfer_cpu": 0.0, "pin_cpu": None, "step_wall": None,
           "step_cpu": None}
    shared = _Model(fig, 0, 1.0, cores=2.0, other=1.0)
    assert shared.rate(0) == pytest.approx(100.0) and shared.rate(2) == pytest.approx(400 / 3)
    owned = _Model(fig, 0, 1.0)
    assert owned.rate(2) == pytest.approx(owned.rate(0))


def test_beside_load_a_worker_more_wins_a_share():
    # Beside one busy process on 2 cores, 3 workers get 3/2 of the cores where 2 get 4/3 (12.5% more), 4 get 8/5
    # (6.7% more), 5 get 5/3 (4.2% more): the planner, budgeting the core the load leaves, proposes 2; a worker more
    # is proposed while it gives 5% more. Alone, nothing changes.
    from sluice.torch.model import _Model, _beside_load
    fig = {"batches": 100, "k": 1.0, "parts": {"__getitem__ (read, decode, rest)": [1.0, 1.0]}, "work_cpu": 1.0,
           "work_wall": 1.0, "worker_runq": 0.0, "transfer_cpu": 0.0, "pin_cpu": None, "step_wall": None,
           "step_cpu": None}
    shared = _Model(fig, 0, 1.0, cores=2.0, other=1.0)
    assert shared.rate(3) == pytest.approx(150.0) and shared.rate(4) == pytest.approx(160.0)
    assert shared.rate(5) == pytest.approx(500.0 / 3)
    assert _beside_load(shared, 2, 8, 100.0) == 4  # 5 would give 4.2% more
    assert _beside_load(shared, 2, 3, 100.0) == 3  # at most `most`
    assert _beside_load(shared, 0, 8, 100.0) == 0
    alone = _Model(fig, 0, 2.0, cores=2.0)
    assert _beside_load(alone, 2, 8, 100.0) == 2


def test_beside_load_a_busy_main_thread_bounds_the_workers():
    # The main thread is one thread however many workers there are: beside one busy process on 2 cores the fair
    # scheduler gives it and the hog the same share, so with 5 ms of main-thread CPU and 10 ms of worker CPU a batch
    # the rate is at most 2 / (15 ms + 5 ms) = 100 batches/s, where counting processes (5 of 6 runnable) gave 111.
    from sluice.torch.model import _Model, _beside_load
    fig = {"batches": 100, "k": 1.0, "parts": {"__getitem__ (read, decode, rest)": [1.0, 1.0]}, "work_cpu": 1.0,
           "work_wall": 1.0, "worker_runq": 0.0, "transfer_cpu": 0.5, "pin_cpu": None, "step_wall": None,
           "step_cpu": None}
    shared = _Model(fig, 2, 1.0, cores=2.0, other=1.0)
    assert shared.rate(4) == pytest.approx(100.0)
    assert shared.rate(2) == pytest.approx(2 / 0.020)  # the workers' 5 ms each equal the main thread's
    assert _beside_load(shared, 2, 8, 100.0) == 2  # more workers leave the main thread's share as it is
    alone = _Model(fig, 2, 2.0, cores=2.0)
    assert alone.rate(4) == pytest.approx(2 / 0.015)


def test_a_loader_without_workers_drops_the_multiprocessing_context():
    # torch refuses a multiprocessing_context without workers: tuned() to 0 workers, and the no-workers probe, drop it
    from sluice.torch.loader import _loader_args, _make_loader
    loader = torch.utils.data.DataLoader(Samples(8), batch_size=4, num_workers=2, multiprocessing_context="spawn")
    zero = _make_loader(_loader_args(loader), num_workers=0)
    assert zero.num_workers == 0 and zero.multiprocessing_context is None and len(list(zero)) == 2


class WhereRun(torch.utils.data.Dataset):
    """Samples that log the process making them (its pid; in a worker or not) and cost ten times more CPU in a worker
    than without workers; without workers, mode "raise" raises and "hang" never returns."""

    def __init__(self, log, mode="ok"):
        self.log, self.mode = log, mode

    def __len__(self):
        return 100000

    def __getitem__(self, i):
        worker = torch.utils.data.get_worker_info() is not None
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {int(worker)}\n")
        if not worker and self.mode == "raise":
            raise RuntimeError("planted failure without workers")
        if not worker and self.mode == "hang":
            time.sleep(3600)
        spin(1e-3 if worker else 1e-4)
        return torch.zeros(2)


def where_run(log):
    """{pid: set of 'in a worker' flags} from a WhereRun log."""
    out = {}
    for line in open(log):
        pid, worker = line.split()
        out.setdefault(int(pid), set()).add(worker == "1")
    return out


def test_no_workers_is_probed_in_a_child(tmp_path, nothing_left):
    # With workers, num_workers=0 is priced by the loader's own fetch without workers in a forked child: the user's
    # process never runs the dataset, and the child's figure (samples 10x cheaper there, by construction) is the
    # model's: the workers' figure would predict num_workers=0 at about their own rate.
    log = tmp_path / "where.log"
    # (check_seconds=0: a proposal of num_workers=0 would be measured in a child of its own, also without workers)
    r = st.diagnose(torch.utils.data.DataLoader(WhereRun(log), batch_size=4, num_workers=2), seconds=0.5, cores=2,
                    check_seconds=0)
    d = r.to_dict()
    runs = where_run(log)
    assert os.getpid() not in runs
    probe = [pid for pid, w in runs.items() if False in w]
    assert len(probe) == 1 and runs[probe[0]] == {False}  # one child, which ran no worker's samples
    p0 = d["measured"]["no_workers"]
    assert p0["batches"] >= 1 and p0["cpu"] < 0.5 * d["measured"]["worker_cpu_per_batch"]
    # num_workers=0 is priced at the child's own rate: its CPU, blocked time and wait for a core a batch (a comparison
    # with the workers' measured rate would be one of rates: beside other load a single thread gets a smaller share
    # of the cores than two workers, which can eat the 10x)
    assert d["whatif"]["no_workers"] == pytest.approx(1 / (p0["cpu"] + p0["blocked"] + p0["runq"]))
    assert not any("probe without workers" in n for n in d["notes"])


@pytest.mark.parametrize("mode", ["raise", "hang"])
def test_no_workers_probe_falls_back(tmp_path, nothing_left, monkeypatch, mode):
    # A dataset that raises, or hangs, without workers: the diagnosis stands on the workers' figures and says so;
    # the hanging child is killed at the probe's timeout.
    import sluice.torch.probe as td
    monkeypatch.setattr(td, "PROBE_TIMEOUT", 0.5)
    log = tmp_path / "where.log"
    r = st.diagnose(torch.utils.data.DataLoader(WhereRun(log, mode), batch_size=4, num_workers=2), seconds=0.5,
                    cores=2, check_seconds=0)
    d = r.to_dict()
    assert d["measured"]["no_workers"] is None and d["whatif"]["no_workers"] > 0
    note = [n for n in d["notes"] if "the probe without workers gave no figure" in n]
    assert len(note) == 1, d["notes"]
    assert ("RuntimeError: planted failure without workers" if mode == "raise" else "timeout") in note[0]
    assert "probe without workers gave no figure" in str(r)
    child = [pid for pid, w in where_run(log).items() if False in w]
    assert len(child) == 1 and child[0] != os.getpid()
    with pytest.raises(ProcessLookupError):  # killed and waited for
        os.kill(child[0], 0)


def test_ctrl_c_during_the_no_workers_probe(tmp_path, nothing_left, monkeypatch):
    # Ctrl-C while the probe's child hangs: the KeyboardInterrupt reaches the caller and the child is killed.
    import sluice.torch.probe as td
    monkeypatch.setattr(td, "PROBE_TIMEOUT", 60.0)
    log = tmp_path / "where.log"
    log.write_text("")
    main, stop = os.getpid(), threading.Event()

    def interrupt_once_probed():  # the child's first sample is logged before it hangs
        while not stop.wait(0.02):
            if any(False in w for w in where_run(log).values()):
                os.kill(main, signal.SIGINT)
                return

    watcher = threading.Thread(target=interrupt_once_probed)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            st.diagnose(torch.utils.data.DataLoader(WhereRun(log, "hang"), batch_size=4, num_workers=2),
                        seconds=0.5, cores=2)
    finally:
        stop.set()
        watcher.join()
    child = [pid for pid, w in where_run(log).items() if False in w]
    assert len(child) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(child[0], 0)


class Sleepy(torch.utils.data.Dataset):
    """Samples that wait (a sleep stands for a slow read) and cost almost no CPU."""

    def __len__(self):
        return 4000

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.zeros(2)


def test_blocked_workers_want_more_workers(nothing_left):
    r = st.diagnose(torch.utils.data.DataLoader(Sleepy(), batch_size=8, num_workers=2), seconds=SECONDS, cores=2)
    d = r.to_dict()
    assert d["bottleneck"]["kind"] == "blocked" and "blocked" in d["bottleneck"]["words"]
    assert d["measured"]["worker_blocked_per_batch"] > d["measured"]["worker_cpu_per_batch"]
    assert 2 < d["proposal"]["num_workers"]["value"] <= MAX_WORKERS_PER_CORE * 2


def test_no_workers_is_diagnosed_and_tuned(nothing_left):
    loader = planted("few_workers", workers=0)
    r = st.diagnose(loader, seconds=SECONDS, cores=2)
    d = r.to_dict()
    assert d["bottleneck"]["kind"] == "num_workers=0"
    assert d["proposal"]["num_workers"]["value"] >= 1
    # the proposal ran against the loader as given (real runs: each round has a rate), and is recommended only if
    # it measured faster: tuned() applies what is recommended, else keeps the settings
    c = d["check"]
    assert len(c["rates"]["as given"]) == len(c["rates"]["proposed"]) == 2 and min(c["rates"]["proposed"]) > 0
    fewest = min(c["batches"]["as given"] + c["batches"]["proposed"])
    assert c["least_batches"] == 3
    assert c["recommended"] == bool(d["recommend"]) == (fewest >= 3 and c["measured_gain"] > 1.05 and all(
        p > 1.05 * g for g, p in zip(c["rates"]["as given"], c["rates"]["proposed"])))
    t = st.tuned(loader, r)
    assert t.num_workers == (d["proposal"]["num_workers"]["value"] if d["recommend"] else 0)
    assert t.dataset is loader.dataset and t.batch_sampler is loader.batch_sampler
    assert t.collate_fn is loader.collate_fn
    assert loader.num_workers == 0  # the user's loader is left as it was


class Stream(torch.utils.data.IterableDataset):
    """An iterable dataset with a list of transform callables; each worker reads its own share."""

    def __init__(self, n):
        self.n = n
        self.transform = [Cheap(50), Slow(800)]

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        k, of = (info.id, info.num_workers) if info else (0, 1)
        for i in range(k, self.n, of):
            x = torch.full((2,), float(i))
            for t in self.transform:
                x = t(x)
            yield x


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_dataset(nothing_left, workers):
    loader = torch.utils.data.DataLoader(Stream(400), batch_size=4, num_workers=workers)
    r = st.diagnose(loader, seconds=SECONDS, cores=2)
    d = r.to_dict()
    assert {"Cheap", "Slow"} <= set(d["measured"]["steps"])
    assert d["bottleneck"]["step"] == "Slow"
    assert d["spec"] is None and d["notes"]  # an iterable dataset does not translate
    assert set(d) >= {"bottleneck", "bound", "measured", "recommend"} and d["bound"] > 0


def test_steps_inside_a_subset_are_timed(nothing_left):
    # random_split gives Subsets: the transform sits on the inner dataset; the user's dataset keeps its own steps.
    inner = Samples(400, transform=Slow(500))
    part, _ = torch.utils.data.random_split(inner, [300, 100], generator=torch.Generator().manual_seed(0))
    r = st.diagnose(torch.utils.data.DataLoader(part, batch_size=4), seconds=0.3, cores=2)
    assert "Slow" in r.to_dict()["measured"]["steps"] and r.to_dict()["bottleneck"]["step"] == "Slow"
    assert type(inner.transform) is Slow


def test_vision_dataset_through_its_transforms_pair(nothing_left):
    # A torchvision VisionDataset whose __getitem__ calls self.transforms (the transform and target_transform
    # pair): both steps are timed, once each, and the pair is no step of its own.
    from torchvision.datasets import VisionDataset

    class Pairs(VisionDataset):
        def __len__(self):
            return 400

        def __getitem__(self, i):
            return self.transforms(torch.zeros(2), i)

    ds = Pairs("", transform=Slow(300), target_transform=Cheap(20))
    r = st.diagnose(torch.utils.data.DataLoader(ds, batch_size=4), seconds=0.3, cores=2)
    steps = r.to_dict()["measured"]["steps"]
    assert {"Slow", "target_transform: Cheap"} <= set(steps) and not any("StandardTransform" in n for n in steps)
    assert type(ds.transforms.transform) is Slow  # the user's dataset is left as it is


@pytest.mark.parametrize("persistent", [False, True])
def test_traced_loop_yields_what_the_loader_yields(nothing_left, persistent):
    loader = torch.utils.data.DataLoader(Samples(40, transform=Cheap(10)), batch_size=5, num_workers=2,
                                         persistent_workers=persistent)
    plain = [b for b in loader]
    traced = []
    with st.diagnose(loader, None) as r:
        for _ in range(2):
            traced.extend(b for b in loader)
    assert type(loader) is torch.utils.data.DataLoader  # put back
    assert len(traced) == 2 * len(plain)
    for a, b in zip(plain + plain, traced):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert r.to_dict()["measured"]["training_step"] is not None
    assert r.to_dict()["measured"]["no_workers"]["batches"] >= 1  # probed after the with block too
    del plain, traced, loader  # the loader's own persistent workers (of the plain run) go with it


class Raises(torch.utils.data.Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        if i == 37:
            raise ValueError("planted failure at sample 37")
        return torch.zeros(2)


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_that_raises(nothing_left, workers):
    loader = torch.utils.data.DataLoader(Raises(), batch_size=4, num_workers=workers)
    with pytest.raises(ValueError, match="planted failure at sample 37"):
        st.diagnose(loader, seconds=30)


@pytest.mark.parametrize("mode", ["call", "with"])
def test_ctrl_c_leaves_nothing_running(nothing_left, mode):
    loader = planted("slow_step")
    timer = threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            if mode == "call":
                st.diagnose(loader, seconds=30)
            else:
                with st.diagnose(loader, None):
                    while True:
                        for _ in loader:
                            pass
    finally:
        timer.cancel()
        timer.join()
    assert type(loader) is torch.utils.data.DataLoader


class Brighten:
    """A custom step with no sluice equivalent."""

    def __call__(self, x):
        return x * 1.0


def test_compose_translates_with_python_steps(folder, tmp_path, nothing_left):
    tv = pytest.importorskip("torchvision")
    T = tv.transforms
    tf = T.Compose([T.Resize(20), T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]), Brighten(), lambda x: x + 0])
    loader = torch.utils.data.DataLoader(tv.datasets.ImageFolder(str(folder), transform=tf), batch_size=4,
                                         shuffle=True, num_workers=1)
    r = st.diagnose(loader, seconds=0.5)
    spec = r.spec
    fns = [op.get("fn") for op in spec["ops"]]
    assert spec["ops"][0]["op"] == "image_folder" and fns[1:6] == ["decode_image", "resize", "random_resized_crop",
                                                                   "random_flip", "normalize"]
    assert spec["ops"][2]["args"] == {"shorter_side": 20, "method": "bilinear"}
    norm = spec["ops"][5]["args"]
    assert norm["layout"] == "CHW" and norm["mean"] == [0.5] * 3 and abs(norm["scale"] - 1 / 255) < 1e-12
    assert len(r.python_steps) == 2 and fns[6:8] == r.python_steps  # Brighten and the lambda stay Python
    # The cache what-if holds the samples after the deterministic prefix (decode, Resize): 20x25 RGB each.
    cache = r.to_dict()["whatif"]["cache"]
    assert cache["after"] == "Resize" and cache["bytes"] == 12 * 20 * 25 * 3 and cache["fits"]
    assert "Brighten" in r.python_steps[0] and "lambda" in r.python_steps[1]
    assert "sluice_spec" not in r.to_dict()  # Python steps: not planned unless asked
    sp = r.compare_spec(seconds=0.5)
    assert sp["predicted"] > 0 and sp["unit"] == "batches/s" and "the same pipeline in sluice: predicted" in str(r)
    batches = list(r.pipeline())
    assert len(batches) == 3 and batches[0]["image"].shape == (4, 3, 16, 16) and batches[0]["image"].dtype == "float32"
    page = r.save_html(tmp_path / "r.html")
    text = open(page).read()
    assert "DataLoader diagnosis" in text and "<svg" in text


@pytest.mark.parametrize("chain", ["to_tensor", "pil_to_tensor_float", "pil_to_tensor"])
def test_translated_spec_yields_what_the_loader_yields(folder, nothing_left, chain):
    # Deterministic steps only: the spec's batches are the loader's (same files, order, pixels, dtype, labels).
    np = pytest.importorskip("numpy")
    tv = pytest.importorskip("torchvision")
    T = tv.transforms
    steps, fns = {
        "to_tensor": ([T.ToTensor(), T.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])], ["normalize"]),
        "pil_to_tensor_float": ([T.PILToTensor(), T.ConvertImageDtype(torch.float32)], ["normalize"]),
        "pil_to_tensor": ([T.PILToTensor()], [None]),  # uint8 CHW: a Python step
    }[chain]
    loader = torch.utils.data.DataLoader(tv.datasets.ImageFolder(str(folder), transform=T.Compose(
        [T.CenterCrop(16)] + steps)), batch_size=4)
    r = st.diagnose(loader, seconds=0.3, spec_seconds=0)
    got = [op.get("fn") for op in r.spec["ops"][1:4]]
    assert got[:2] == ["decode_image", "center_crop"] and (got[2] in r.python_steps if fns == [None] else
                                                           got[2:] == fns)
    n = 0
    for (x, y), b in zip(loader, r.pipeline()):
        assert b["image"].dtype == x.numpy().dtype
        np.testing.assert_allclose(x.numpy(), b["image"], atol=1e-5)
        np.testing.assert_array_equal(y.numpy(), b["label"])
        n += 1
    assert n == 3


def test_cli_traces_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        f"sys.path.insert(0, {os.path.join(ROOT, 'bench')!r})\n"
        "from torch_planted import planted\n"
        "loader = planted('slow_step', workers=1)\n"
        "for epoch in range(1000):\n"
        "    for batch in loader:\n"
        "        pass\n"
        "print('the script ran to its end')\n")
    out = subprocess.run([sys.executable, "-m", "sluice.torch", "diagnose", "--seconds", "1", "--json",
                          str(tmp_path / "d.json"), str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "bottleneck:" in out.stdout and "the script ran to its end" not in out.stdout
    # the no-workers probe ran from the command line too (a forked child of the script's process)
    assert json.load(open(tmp_path / "d.json"))["measured"]["no_workers"]["batches"] >= 1
    bad = subprocess.run([sys.executable, "-m", "sluice.torch", "diagnose"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_a_loader_made_from_a_batch_sampler(nothing_left):
    # tuned() of a tuned loader: built with batch_sampler=, its batch_size is None; the copy must still batch.
    loader = planted("few_workers", workers=0)
    again = st.tuned(st.tuned(loader, st.diagnose(loader, seconds=0.3)), seconds=0.3)
    assert again.batch_size is None and again.batch_sampler is loader.batch_sampler
    x, i = next(iter(again))
    assert x.shape == (8, 4) and i.shape == (8,)


# -- what diagnose recommends is measured (issue 48): the measuring function is planted, so that these tests hold on
# any machine; test_no_workers_is_diagnosed_and_tuned runs the real one.

def planted_rates(monkeypatch, rate_of):
    """Replaces the check's loader measurement by `rate_of(loader)` batches/s; returns the loaders it was given."""
    import sluice.torch.check as ck
    seen = []

    def fake(loader, seconds, warmup=0.0):
        seen.append(ck.settings_of(loader))
        return rate_of(loader) * seconds, seconds
    monkeypatch.setattr(ck, "measure_loader", fake)
    return seen


def test_check_runs_count_after_a_warmup(monkeypatch, nothing_left):
    # Every loader run of the check counts from WARMUP after its first batch (workers started beside other load
    # deliver their first batches over that time), as the bench's grid counts; the up-front words count it.
    import sluice.torch.check as ck
    warm = []

    def fake(loader, seconds, warmup=0.0):
        warm.append(warmup)
        return (60.0 if loader.num_workers else 50.0) * seconds, seconds
    monkeypatch.setattr(ck, "measure_loader", fake)
    r = st.diagnose(planted("few_workers", workers=0), seconds=0.5, cores=4, quiet=True)
    assert r.to_dict()["check"]["rounds"] == ck.ROUNDS
    assert ck.WARMUP > 0 and len(warm) >= 2 * ck.ROUNDS and all(w == ck.WARMUP for w in warm), warm


def test_a_proposal_that_measures_slower_is_not_recommended(monkeypatch, nothing_left):
    # The model proposes workers for a num_workers=0 loader of CPU-heavy samples (4 cores of budget: about 4x); the
    # planted measurement has them slower than the loader as given: nothing is recommended, and the report says why
    # with both figures. tuned() keeps the settings.
    loader = planted("few_workers", workers=0)
    seen = planted_rates(monkeypatch, lambda L: 40.0 if L.num_workers else 50.0)
    r = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    d = r.to_dict()
    assert d["proposal"]["num_workers"]["value"] > 0 and d["check"]["predicted_gain"] > 1.05
    assert [s["num_workers"] > 0 for s in seen] == [False, True, True, False]  # alternating: given first, then last
    assert d["recommend"] == {} and r.recommended == {} and not d["check"]["recommended"]
    assert d["check"]["measured_gain"] == pytest.approx(0.8)
    text = str(r)
    assert "recommend: no change helps here: the model's proposal (num_workers=" in text
    assert "measured 0.80x the settings as given (40 against 50 batches/s as given" in text
    assert st.tuned(loader, r).num_workers == 0
    # ... and measured faster, the same proposal is recommended with both figures
    planted_rates(monkeypatch, lambda L: 100.0 if L.num_workers else 50.0)
    r = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    assert r.recommended["num_workers"] == r.to_dict()["proposal"]["num_workers"]["value"] > 0
    assert "recommend (measured 2.00x: 100 against 50 batches/s as given" in str(r)
    # ... but not from runs of fewer than 3 batches (2 and 1 a run here): those tell nothing
    r = st.diagnose(loader, seconds=0.5, cores=4, check_seconds=0.02, quiet=True)
    assert r.recommended == {} and "too few to tell" in str(r)


def test_choose_takes_the_fastest_measured_faster():
    import sluice.torch.check as ck
    assert ck.choose({"proposed": (True, 1.2, ""), "a worker more": (True, 1.3, "")}) == "a worker more"
    assert ck.choose({"proposed": (True, 1.2, ""), "a worker more": (False, 1.4, "")}) == "proposed"
    assert ck.choose({"proposed": (False, 1.04, ""), "a worker more": (True, 1.1, "")}) == "a worker more"
    assert ck.choose({"proposed": (False, 1.2, "")}) is None


def test_a_worker_more_is_measured_beside_load(monkeypatch, nothing_left):
    # Beside other load the model's pick comes with a worker more (model._recommend's "next"; planted here, as the
    # load is): the check runs both against the settings as given and recommends the faster of those measured
    # faster; a worker more that measures slower than the pick leaves the pick.
    import sluice.torch.report as rp
    orig = rp._recommend

    def with_next(*a, **k):
        out = orig(*a, **k)
        nw = out["num_workers"]
        nw["next"] = {"value": nw["value"] + 1, "predicted": nw["predicted"] * 1.02}
        return out
    monkeypatch.setattr(rp, "_recommend", with_next)
    loader = planted("few_workers", workers=0)
    pick = []
    seen = planted_rates(monkeypatch, lambda L: 50.0 if not L.num_workers else
                         (60.0 if L.num_workers == pick[0] else 80.0) if pick else 60.0)
    r = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    w = r.to_dict()["proposal"]["num_workers"]["value"]
    pick.append(w)
    r = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    d = r.to_dict()
    assert sorted({s["num_workers"] for s in seen[-6:]}) == [0, w, w + 1]
    assert r.recommended["num_workers"] == w + 1 and d["check"]["a_worker_more"]["num_workers"] == w + 1
    assert d["check"]["measured_gain"] == pytest.approx(1.6)
    assert any("a worker more than the model's pick (%d workers): 1.60x" % (w + 1) in n for n in d["notes"])
    assert st.tuned(loader, r).num_workers == w + 1
    # ... slower than the pick: the pick
    planted_rates(monkeypatch, lambda L: 50.0 if not L.num_workers else 70.0 if L.num_workers == w else 55.0)
    r = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    assert r.recommended["num_workers"] == w and r.to_dict()["check"]["measured_gain"] == pytest.approx(1.4)
    # ... neither faster than as given: nothing
    planted_rates(monkeypatch, lambda L: 50.0 if not L.num_workers else 51.0)
    r = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    assert r.recommended == {}


def test_a_change_predicted_within_the_noise_is_not_measured(monkeypatch, nothing_left):
    # A proposal the model predicts at <= 1.05x is not run at all: "no change helps here", with the prediction.
    import sluice.torch.model as model
    loader = planted("few_workers", workers=0)
    seen = planted_rates(monkeypatch, lambda L: 100.0 if L.num_workers else 50.0)
    monkeypatch.setattr(model._Model, "predict", lambda self, w, measured: measured * (1.04 if w else 1.0))
    r = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    assert seen == [] and r.recommended == {}
    assert "no change helps here: the model's best settings (num_workers=" in str(r) and "predict 1.04x" in str(r)


def test_tuned_then_diagnosed_again_changes_nothing(monkeypatch, nothing_left):
    # Workers measure faster than none: the first diagnosis recommends them and tuned() applies them. Diagnosed
    # again, the tuned loader gets no change: the model's proposal is its own settings, or settings that measure
    # no faster, and the settings it was tuned from (num_workers=0, measured slower) are not tried again.
    loader = planted("few_workers", workers=0)
    seen = planted_rates(monkeypatch, lambda L: 100.0 if L.num_workers else 50.0)
    first = st.diagnose(loader, seconds=0.5, cores=4, quiet=True)
    assert first.recommended["num_workers"] > 0
    tuned = st.tuned(loader, first)
    assert tuned.num_workers == first.recommended["num_workers"]
    del seen[:]
    again = st.diagnose(tuned, seconds=0.5, cores=4, quiet=True)
    assert again.recommended == {} and "no change helps here" in str(again)
    assert not any(s["num_workers"] == 0 for s in seen), seen
    assert st.tuned(tuned, again).num_workers == tuned.num_workers


def test_the_tuned_from_settings_are_not_tried_again():
    # The memory tuned() leaves on its loader: a proposal of the settings it was tuned from is not measured.
    import sluice.torch.check as ck
    was = {"num_workers": 0, "prefetch_factor": None, "persistent_workers": False, "pin_memory": False}
    now = dict(was, num_workers=2, prefetch_factor=2, persistent_workers=True)
    go, why = ck.decide(now, was, 1.4, {"settings": was, "ratio": 0.5})
    assert not go and "tuned() chose these settings over the proposal (num_workers=0" in why and "0.50x" in why
    assert ck.decide(now, was, 1.4, None) == (True, None)
    assert not ck.decide(now, now, 1.4, None)[0]


def test_few_batches_name_the_dominant_step(nothing_left):
    # One worker, batches of 32 samples that each spend 4 ms of CPU in Slow: at most about 7 batches a second, so a
    # 1 s window holds far fewer than the 32 batches the planner's bound needs, but 32 samples a batch went through
    # every step, and Slow has most of the workers' CPU: the headline names it, not "the trace is too short".
    from torchvision import transforms as T
    loader = torch.utils.data.DataLoader(Samples(4000, transform=T.Compose([Cheap(100), Slow(4000), Cheap(100)])),
                                         batch_size=32, num_workers=1)
    said = []
    r = st.diagnose(loader, seconds=1.0, cores=2, check_seconds=0, progress=said.append)
    d = r.to_dict()
    assert d["measured"]["batches"] < 32
    b = d["bottleneck"]
    assert b["kind"] != "too short" and b["step"] == "Slow" and "Slow" in b["words"], b
    assert "the trace is too short" not in str(r) and f"bottleneck: {b['words']}" in str(r)
    # what it would take was said before the tracing began; with the check off, nothing is recommended unmeasured
    assert said[0].startswith("tracing the loader for 1 s after its first batch") and "s at most" in said[0]
    assert r.recommended == {} and "was not measured (check_seconds=0)" in str(r)
    # without workers, the main process doing all of it is named, though no step has half of it (three alike)
    loader = torch.utils.data.DataLoader(Samples(4000, transform=T.Compose([Slow(1500), Slow(1500), Slow(1500)])),
                                         batch_size=32)
    d = st.diagnose(loader, seconds=1.0, cores=2, check_seconds=0, quiet=True).to_dict()
    assert d["measured"]["batches"] < 32 and d["bottleneck"]["kind"] == "num_workers=0", d["bottleneck"]


def test_quiet_says_nothing(capsys, nothing_left):
    st.diagnose(planted("slow_step", workers=1), seconds=0.3, cores=2, check_seconds=0, quiet=True)
    assert capsys.readouterr().err == ""
    st.diagnose(planted("slow_step", workers=1), seconds=0.3, cores=2, check_seconds=0)
    assert capsys.readouterr().err.startswith("sluice.torch.diagnose: tracing the loader for 0.3 s")


def test_the_same_pipeline_in_sluice_is_measured(folder, nothing_left):
    # A chain that translates whole: the planned spec runs in the check's rounds beside the loader as given, and its
    # figure is a measured one.
    tv = pytest.importorskip("torchvision")
    T = tv.transforms
    loader = torch.utils.data.DataLoader(tv.datasets.ImageFolder(str(folder), transform=T.Compose(
        [T.CenterCrop(16), T.ToTensor()])), batch_size=4)
    r = st.diagnose(loader, seconds=0.3, spec_seconds=0.5, check_seconds=0.3, quiet=True)
    d = r.to_dict()
    sp, c = d["sluice_spec"], d["check"]
    assert len(c["rates"]["sluice"]) == 2 and min(c["rates"]["sluice"]) > 0
    assert sp["measured"] == pytest.approx(sum(c["rates"]["sluice"]) / 2)
    assert sp["measured_over_loader"] == pytest.approx(sp["measured"] / (sum(c["rates"]["as given"]) / 2))
    assert "the same pipeline in sluice: measured" in str(r)


def test_without_workers_other_threads_cpu_is_not_the_loaders(nothing_left):
    # num_workers=0: CPU the process spends beyond the main thread's next() (torch's intra-op threads spinning after
    # the transforms' tensor ops, here a thread hashing without the GIL) does not follow the work into worker
    # processes, so the trace the planner reads leaves it out: counted, the machine read as saturated and a
    # 2-worker proposal that measured 1.8x was priced at 1.01x (issue 48).
    import hashlib
    stop = threading.Event()
    blob = b"x" * (4 << 20)

    def burn():
        while not stop.is_set():
            hashlib.sha256(blob).digest()  # releases the GIL: the main thread's loader runs beside it

    t = threading.Thread(target=burn, daemon=True)
    loader = torch.utils.data.DataLoader(Samples(256, load_us=300), batch_size=8, num_workers=0)
    t.start()
    try:
        r = st.diagnose(loader, seconds=SECONDS, spec_seconds=0, check_seconds=0, quiet=True)
    finally:
        stop.set()
        t.join()
    run = r.trace["run"]
    main = r.trace["ops"][1]["cpu_seconds"]  # the samples' CPU on the main thread
    assert run["process_cpu_seconds"] < main + 0.5 * run["seconds"], run  # the hashing thread's core left out


class ManyTensors(torch.utils.data.Dataset):
    """Samples of 48 small tensors each: cheap to make, each batch costly to hand over from a worker (a shared-memory
    segment and a file descriptor passed over a socket per tensor)."""

    def __len__(self):
        return 100000

    def __getitem__(self, i):
        return {f"t{k}": torch.full((2,), float(i)) for k in range(48)}


def test_without_workers_the_hand_off_is_probed(nothing_left):
    # num_workers=0 shows no hand-off: the probe runs the loader with one worker and prices it. Its batches cost
    # more to take from a worker than to make here, so workers are not proposed. Before the probe the model priced
    # 2 workers at about 2x (the main thread's next() holding nothing but the work).
    loader = torch.utils.data.DataLoader(ManyTensors(), batch_size=2, num_workers=0)
    r = st.diagnose(loader, seconds=SECONDS, spec_seconds=0, check_seconds=0, quiet=True)
    d = r.to_dict()
    h = d["measured"]["handoff"]
    assert h and h["batches"] >= 3, d["notes"]
    assert h["main"] > d["measured"]["worker_cpu_per_batch"], (h, d["measured"]["worker_cpu_per_batch"])
    assert d["proposal"]["num_workers"]["value"] == 0, d["proposal"]


def test_without_workers_a_failed_hand_off_probe_is_said(nothing_left, monkeypatch):
    import sluice.torch.report as report
    monkeypatch.setattr(report, "_probe_hand_off", lambda loader: (None, "planted failure"))
    loader = planted("few_workers", workers=0)
    d = st.diagnose(loader, seconds=SECONDS, spec_seconds=0, check_seconds=0, quiet=True).to_dict()
    assert d["measured"]["handoff"] is None
    assert any("hand-off" in n and "planted failure" in n for n in d["notes"]), d["notes"]
