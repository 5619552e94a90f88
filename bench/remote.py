#!/usr/bin/env python3
"""bench/remote.py: issue 50's remote-data benchmark (`make bench-remote`, as root; not part of make test). The
imagenet pipeline reads WebDataset tar shards over HTTP from an nginx in a network namespace the bench creates
(`ip netns add`, a veth pair, 10.231.50.1 <-> .2), with the link capped by a `tc tbf` qdisc on both veth ends
(200 Mbit/s; this kernel has no netem) and 50 ms to first byte from nginx's echo module (`echo_sleep 0.05`). Then,
alternating in rounds on the same shards and cores: sluice optimize's plan (the network model sets the readahead),
the same spec with the online AUTOTUNE tuner (hand-set defaults: knobs resolved without the network model), and
webdataset + DataLoader (bench/peers/torch_formats.py, the best of num_workers 0/1/2/4) on the same URLs, the spec
as written (its "autotune" knobs at their documented defaults, no tuner) and the plan over the same shards on the
local disk (the CPU bound: what the plan does without the network); the time to the first batch against one
shard's download; and one epoch's digest through tests/integration/remote_proxy.py (5% of the requests answered
503, 2% cut mid-body) against the fault-free epoch's. Splices "## Remote data" into BENCHMARKS.md (or --out).

usage: bench/remote.py [SLUICE] [--quick] [--out FILE] [--peers-python PY] [--rate MBIT] [--latency S]
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import formats as F  # noqa: E402  (bench/formats.py: its data layout, its peers' Python, bench/run's helpers as F.B)

B = F.B
TOP = B.TOP
NS, HOST_IP, NS_IP = "slbench50", "10.231.50.1", "10.231.50.2"
HEAD = "## Remote data"
ROUNDS = (1, 3)
# measured, warm-up: 20 s windows, since a network-bound run draws its buffers down (the plan's prefetch holds up to
# 9 batches, 576 examples, filled in the warm-up), which in 8 s windows put the plan above the link's rate
SECONDS = ((2.0, 1.0), (20.0, 3.0))


def sh(*cmd, check=True):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode:
        raise SystemExit("bench-remote: %s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return r


def link_up(rate_mbit):
    """The namespace, its veth pair and the rate cap (both directions); torn down by link_down."""
    link_down()
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", "slb50h", "type", "veth", "peer", "name", "slb50n")
    sh("ip", "link", "set", "slb50n", "netns", NS)
    sh("ip", "addr", "add", HOST_IP + "/24", "dev", "slb50h")
    sh("ip", "link", "set", "slb50h", "up")
    sh("ip", "netns", "exec", NS, "ip", "addr", "add", NS_IP + "/24", "dev", "slb50n")
    sh("ip", "netns", "exec", NS, "ip", "link", "set", "slb50n", "up")
    sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")
    for pre, dev in (((), "slb50h"), (("ip", "netns", "exec", NS), "slb50n")):
        sh(*pre, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "%dmbit" % rate_mbit, "burst", "64kb",
           "latency", "100ms")


def link_down():
    sh("ip", "link", "del", "slb50h", check=False)
    sh("ip", "netns", "del", NS, check=False)


def nginx_up(workdir, root, latency):
    conf = os.path.join(workdir, "nginx.conf")
    os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
    open(conf, "w").write("""load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
daemon off;
master_process off;
worker_processes 1;
error_log %(w)s/logs/error.log;
pid %(w)s/logs/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %(w)s/logs/body;
  proxy_temp_path %(w)s/logs/proxy;
  fastcgi_temp_path %(w)s/logs/fcgi;
  uwsgi_temp_path %(w)s/logs/uwsgi;
  scgi_temp_path %(w)s/logs/scgi;
  keepalive_requests 100000;
  sendfile on;
  server {
    listen %(ip)s:8050;
    root %(root)s;
    location /slow/ { echo_sleep %(lat)s; echo_exec @files; }
    location @files { rewrite ^/slow/(.*)$ /$1 break; root %(root)s; }
  }
}
""" % {"w": workdir, "ip": NS_IP, "root": root, "lat": latency})
    p = subprocess.Popen(["ip", "netns", "exec", NS, "nginx", "-p", workdir, "-c", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if sh("curl", "-s", "-o", "/dev/null", "http://%s:8050/" % NS_IP, check=False).returncode == 0:
            return p
        time.sleep(0.1)
    p.kill()
    raise SystemExit("bench-remote: nginx did not start in the namespace")


def remote_spec(url_pattern, quick):
    """The formats bench's imagenet spec on tar shards, its files the URLs, every knob on autotune."""
    spec = F.layout_spec("tar", quick)
    spec["ops"][0] = {"op": "files", "glob": url_pattern, "shuffle": True}
    spec["name"] = "imagenet-remote"
    return F.P.autotuned(spec)


def one_epoch(spec_path, out_path, files):
    """The plan as one epoch (its repeat dropped) over `files`: what the digest check reads. The samples keep their
    image, class and key, not `__url__`: the shard's URL differs through the proxy, and so would the digest."""
    spec = json.load(open(spec_path))
    spec["ops"] = [o for o in spec["ops"] if o["op"] != "repeat"]
    spec["ops"][0] = dict(spec["ops"][0], glob=files)
    at = next(i for i, o in enumerate(spec["ops"]) if o["op"] == "interleave") + 1
    spec["ops"].insert(at, {"op": "map", "fn": "select", "args": {"keep": ["jpg", "cls", "__key__"]}})
    json.dump(spec, open(out_path, "w"), indent=1)
    return out_path


def digest(sluice, spec_path, env=None):
    out, _, _ = B.measure([sluice, "run", spec_path, "--digest", "--json", "--quiet"], env=env, timeout=1800)
    r = json.loads(out.strip().splitlines()[-1])
    return r.get("digest"), r.get("examples")


def faults_check(sluice, workdir, plan, pattern):
    """One epoch through the fault proxy (5% 503s, 2% bodies cut) and one straight from nginx: equal digests."""
    port_file, stats = os.path.join(workdir, "proxy.port"), os.path.join(workdir, "proxy.stats")
    proxy = subprocess.Popen([sys.executable, os.path.join(TOP, "tests/integration/remote_proxy.py"), port_file,
                              "%s:8050" % NS_IP, stats, "20", "50"])
    try:
        for _ in range(100):
            if os.path.exists(port_file):
                break
            time.sleep(0.1)
        port = open(port_file).read().strip()
        clean = digest(sluice, one_epoch(plan, os.path.join(workdir, "epoch.json"), pattern))
        via = pattern.replace("http://%s:8050/" % NS_IP, "http://127.0.0.1:%s/" % port)
        # 1 MiB blocks (8 MiB by default): 160 requests for the faults to land on, not 27
        faulty = digest(sluice, one_epoch(plan, os.path.join(workdir, "epoch-faults.json"), via),
                        env={"SLUICE_REMOTE_BLOCK": str(1 << 20)})
        counts = dict(kv.split("=") for kv in open(stats).read().split()) if os.path.exists(stats) else {}
        return {"clean": clean, "faults": faulty, "proxy": counts, "equal": clean == faulty and clean[0] is not None}
    finally:
        proxy.kill()
        proxy.wait()


def local_plan(plan, out_path, files):
    """The plan with its files on the local disk: the CPU bound of the same ops on the same cores."""
    spec = json.load(open(plan))
    spec["ops"][0] = dict(spec["ops"][0], glob=files)
    json.dump(spec, open(out_path, "w"), indent=1)
    return out_path


def first_batch_seconds(sluice, spec_path, n=5):
    """The process's wall time to its first batch (start, first output, exit), n runs: (median, the runs)."""
    ts = []
    for _ in range(n):
        t0 = time.monotonic()
        B.run_cmd([sluice, "run", spec_path, "--take", "1", "--quiet"])
        ts.append(round(time.monotonic() - t0, 2))
    return sorted(ts)[len(ts) // 2], ts


def bench_remote(sluice, quick, workdir, peers_py, rate, latency):
    n, shards, _ = F.gen_layouts(sluice, quick)  # the formats bench's shards (bench/data/formats*/tar)
    tar_dir = os.path.join(F.data_dir(quick), "tar")
    names = sorted(f for f in os.listdir(tar_dir) if f.endswith(".tar"))
    first, last = names[0], names[-1]  # train-00000-of-000NN.tar ... : one brace range names them all
    width = len(first.split("-")[1])
    pattern = "http://%s:8050/slow/tar/%s-{%s..%s}-%s" % (NS_IP, first.split("-")[0], first.split("-")[1],
                                                     last.split("-")[1], "-".join(first.split("-")[2:]))
    assert width and len(names) == shards
    link_up(rate)
    ngx = nginx_up(workdir, F.data_dir(quick), latency)
    try:
        src = os.path.join(workdir, "remote-src.json")
        json.dump(remote_spec(pattern, quick), open(src, "w"), indent=1)
        plan = os.path.join(workdir, "remote-plan.json")
        B.log("remote: sluice optimize over the link")
        out, _, _ = B.measure([sluice, "optimize", src, "-o", plan, "--json", "--seconds", "3", "--measure",
                               "1" if quick else "3"], timeout=1800)
        opt = json.loads(out.strip().splitlines()[-1])
        plan_spec = json.load(open(plan))
        # the bytes the plan keeps in memory for the epochs after the first (its readers' "keep")
        plan_keep = sum(s.get("keep", 0) for o in plan_spec["ops"] for s in [o] + o.get("source", []))
        seconds, warm = SECONDS[1 if not quick else 0]
        py, wds = F.peers_python(sluice, peers_py)
        local = local_plan(plan, os.path.join(workdir, "local-plan.json"), os.path.join(tar_dir, "*.tar"))
        runs = {"plan": [], "defaults": [], "autotune": [], "webdataset": [], "wds_cache": [], "local": []}
        failed = {}
        for rnd in range(ROUNDS[1 if not quick else 0]):
            B.log("remote: round %d" % (rnd + 1))
            runs["plan"].append(F.P.run_spec(sluice, plan, seconds, warm))
            runs["defaults"].append(F.P.run_spec(sluice, src, seconds, warm))
            runs["autotune"].append(F.P.run_spec(sluice, src, seconds, warm, extra=["--tuner", "autotune"]))
            runs["local"].append(F.P.run_spec(sluice, local, seconds, warm))
            if py and wds and not failed:
                cmd = [py, os.path.join(HERE, "peers", "torch_formats.py"), "--layout", "tar", "--files", pattern,
                       "--seconds", str(seconds), "--warmup", str(warm), "--workers", "0,1,2,4"]
                # and with webdataset's own cache of the shards (cache_dir on the local disk), measured after its
                # first epoch as the plan's keep is (--warmup-caches): 2 and 4 workers, the best two settings above
                cache_cmd = cmd[:-1] + ["2,4", "--warmup-epochs", "1", "--cache-dir", workdir]
                for key, c in (("webdataset", cmd), ("wds_cache", cache_cmd)):
                    try:
                        o, _, rss = B.measure(c, timeout=1800)
                        r = json.loads(o.strip().splitlines()[-1])
                        runs[key].append({"eps": r["examples_per_second"], "workers": r["workers"],
                                          "version": r["version"]})
                    except (SystemExit, ValueError, IndexError) as e:
                        failed[key] = str(e).strip().splitlines()[-1][:300]
        t_first, _ = first_batch_seconds(sluice, plan, 1 if quick else 3)
        # one epoch from a cold start (the process's wall time to its last batch of the first epoch)
        epoch = {}
        for key, spec in (("plan", plan), ("defaults", src)):
            t0 = time.monotonic()
            B.run_cmd([sluice, "run", spec, "--take", str(n // 64), "--quiet"])
            epoch[key] = round(time.monotonic() - t0, 2)
        # the same plan with its shuffle starting at one batch's worth and growing (the `initial` knob)
        grow = json.load(open(plan))
        for o in grow["ops"]:
            if o["op"] == "shuffle":
                o["initial"] = 64
        json.dump(grow, open(os.path.join(workdir, "plan-initial.json"), "w"))
        t_first_initial, t_first_runs = first_batch_seconds(sluice, os.path.join(workdir, "plan-initial.json"),
                                                            1 if quick else 5)
        shard_url = pattern.split("{")[0] + first.split("-")[1] + "-" + "-".join(first.split("-")[2:])
        dl = [float(sh("curl", "-s", "-o", "/dev/null", "-w", "%{time_total}", shard_url).stdout) for _ in range(3)]
        B.log("remote: one epoch with faults against one without")
        faults = faults_check(sluice, workdir, plan, pattern)
        tar_bytes = sum(os.path.getsize(os.path.join(tar_dir, f)) for f in names)
        return {"images": n, "shards": shards, "rate_mbit": rate, "latency": latency, "optimize": opt,
                "runs": runs, "failed": failed, "first_batch_s": t_first, "first_batch_initial_s": t_first_initial,
                "first_batch_initial_runs": t_first_runs, "one_shard_s": sorted(dl)[1], "first_epoch_s": epoch,
                "faults": faults, "bytes_per_example": tar_bytes / n, "plan_spec": plan_spec, "plan_keep": plan_keep,
                "missing": [] if (py and wds) else ["webdataset: no Python with torch, torchvision and webdataset "
                                                   "(make bench-peers)"],
                "load_average": os.getloadavg(), "seconds": [seconds, warm]}
    finally:
        ngx.kill()
        ngx.wait()
        link_down()


def report(r, m, quick):
    fmt, L = B.fmt, F.section_start(HEAD, 50, quick)
    L.append("%d images in %d WebDataset tar shards served by nginx in a network namespace over a veth pair capped "
             "at %d Mbit/s by tc tbf, with %s s to first byte (echo_sleep); the imagenet spec over the shards' URLs "
             "(`bench/remote.py`). Rounds alternate sluice optimize's plan, the same spec under the AUTOTUNE tuner "
             "(knobs resolved without the network model) and webdataset + DataLoader on the same URLs (best of "
             "num_workers 0/1/2/4; with cache_dir, 2/4), each run %g s after a %g s warm-up (sluice's runs with "
             "--warmup-caches: a plan that keeps the shards is measured after its first epoch, as is webdataset with "
             "cache_dir). Measured %s at commit %s; load average at the end: "
             "%s.\n" % (r["images"], r["shards"], r["rate_mbit"], r["latency"], r["seconds"][0], r["seconds"][1],
                       m["date"], m["commit"],
                 " ".join("%.2f" % x for x in r["load_average"])))
    bound = r["rate_mbit"] * 1e6 / 8
    L.append("| system | examples/s (median) | runs |")
    L.append("| --- | ---: | --- |")
    names = {"plan": "sluice optimize's plan", "defaults": "the spec as written (defaults, no tuner)",
             "autotune": "the spec under the AUTOTUNE tuner", "webdataset": "webdataset + DataLoader",
             "wds_cache": "webdataset + DataLoader with cache_dir (after its first epoch)",
             "local": "the plan on local files (CPU bound)"}
    for k in ("plan", "defaults", "autotune", "webdataset", "wds_cache", "local"):
        rs = r["runs"][k]
        if rs:
            L.append("| %s | %s | %s |" % (names[k], fmt(B.median_of(rs, "eps")),
                                          ", ".join(fmt(x["eps"]) for x in rs)))
    med = {k: B.median_of(rs, "eps") for k, rs in r["runs"].items() if rs}
    link_eps = bound / r["bytes_per_example"]
    o = r["optimize"]
    L.append("")
    if "plan" in med:
        cpu = med.get("local")
        keep = r.get("plan_keep", 0)
        # a plan that keeps the shards reads the link in its first epoch only: its bound after that is the CPU's
        lim = cpu if keep and cpu else min(link_eps, cpu) if cpu else link_eps
        L.append("- the link carries %s examples/s (%s bytes an example); the CPU bound (the plan on local files) is "
                 "%s; the plan reaches %s of %s (target >= 0.9)" % (
                     fmt(link_eps), fmt(r["bytes_per_example"], 0), fmt(cpu) if cpu else "not measured",
                     fmt(med["plan"] / lim, 3),
                     "the CPU bound: it keeps the shards in memory after its first epoch (\"keep\": %s bytes)" % fmt(keep, 0)
                     if keep and cpu else "the lesser"))
        L.append("- the plan's prediction %s examples/s against its median %s here: %s (target within 15%%)" % (
            fmt(64 * o.get("predicted", 0)), fmt(med["plan"]), fmt(64 * o.get("predicted", 0) / med["plan"], 3)))
        for k, t in (("webdataset", 1.5), ("defaults", 2.0), ("autotune", None), ("wds_cache", None)):
            if med.get(k):
                L.append("- the plan against %s: %sx%s" % (names[k], fmt(med["plan"] / med[k], 3),
                                                          " (target >= %.1fx)" % t if t else ""))
    f = r.get("faults") or {}
    if f:
        L.append("- faults: one epoch through a proxy answering 5%% of requests 503 and cutting 2%% mid-body (%s): "
                 "1 MiB blocks; digest %s over %s examples; fault-free (8 MiB blocks) %s: %s" % (
                     ", ".join("%s %s" % kv for kv in sorted(f["proxy"].items())), f["faults"][0], f["faults"][1],
                     f["clean"][0], "equal" if f["equal"] else "DIFFERENT"))
    L.append("")
    L.append("- sluice optimize: predicted %s examples/s, measured %s (prediction error %s), limit %s; the link "
             "carries %s MB/s" % (fmt(64 * o.get("predicted", 0)), fmt(64 * o.get("measured", 0)),
                                  fmt(o.get("prediction_error", 0), 3), o.get("limit", "?"), fmt(bound / 1e6)))
    L.append("- first batch (median, whole process): %.2f s with the spec's shuffle buffer of 1,024 filled first, "
             "%.2f s with `\"initial\": 64` (the buffer growing from one batch; runs %s); one shard's download: %.2f s "
             "(median of 3); %.2fx of it (target: within 2x)" % (
                 r["first_batch_s"], r.get("first_batch_initial_s", float("nan")),
                 ", ".join("%.2f" % x for x in r.get("first_batch_initial_runs", [])), r["one_shard_s"],
                 r.get("first_batch_initial_s", float("nan")) / r["one_shard_s"]))
    ep = r.get("first_epoch_s") or {}
    if ep:
        L.append("- the first %d examples out (an epoch's worth) from a cold start, whole process: the plan %s s (%s "
                 "examples/s), the spec as written %s s (%s examples/s); with the shuffle buffer held full (1,024) the "
                 "readers have read 1,024 more by then, the plan's from its keep" % (
                     r["images"] // 64 * 64, ep.get("plan"), fmt(r["images"] // 64 * 64 / ep["plan"]), ep.get("defaults"),
                     fmt(r["images"] // 64 * 64 / ep["defaults"])))
    for x in r["missing"]:
        L.append("- not measured: %s" % x)
    for k, e in r["failed"].items():
        L.append("- %s did not run: %s" % (k, e.replace("|", "\\|")))
    L.append("")
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sluice", nargs="?", default=os.path.join(TOP, "build/sluice"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--peers-python", default=None)
    ap.add_argument("--rate", type=int, default=200, help="the link's Mbit/s")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds to first byte")
    ap.add_argument("--report-only", action="store_true",
                    help="write the section again from bench/results/remote.json (no runs)")
    a = ap.parse_args()
    if a.report_only:
        saved = json.load(open(os.path.join(TOP, "bench/results", "remote%s.json" % ("-quick" if a.quick else ""))))
        F.save("remote", saved["machine"], saved["remote"], report(saved["remote"], saved["machine"], a.quick),
               a.quick, a.out, HEAD)
        return
    if os.geteuid() != 0:
        raise SystemExit("bench-remote: needs root (ip netns, tc)")
    for tool in ("ip", "tc", "nginx", "curl"):
        if not shutil.which(tool):
            raise SystemExit("bench-remote: %s is missing (make deps; iproute2)" % tool)
    sluice = os.path.abspath(a.sluice)
    m = B.machine()
    workdir = tempfile.mkdtemp(prefix="sluice-remote-")
    try:
        r = bench_remote(sluice, a.quick, workdir, a.peers_python, a.rate, a.latency)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    F.save("remote", m, r, report(r, m, a.quick), a.quick, a.out, HEAD)


if __name__ == "__main__":
    main()
