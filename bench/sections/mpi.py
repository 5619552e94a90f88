"""bench/sections/mpi.py: the MPI offload (issue 18): a trainer fed by 1-2 offload workers against the model's
prediction, and its section."""
import copy, json, os, shutil, statistics

from sections.base import TOP, fmt, log, measure, ratio, run_cmd
from sections.pipelines import with_data


MPI_WORKERS = (1, 2)


MPI_PREDICT = (8, 32)


MPI_RECV_CHARGED = True  # the trainer's receive CPU in the model (sluice optimize --recv-gbps)


def mpi_trainer_run(sluice, spec_path, workers, seconds, warmup):
    """One run of spec_path with the trainer (rank 0) pinned to core 0 and `workers` worker ranks on the other
    core(s) (taskset in an MPMD mpirun, so mpirun's own binding stays off); returns the trainer's JSON line."""
    args = ["run", spec_path, "--seconds", str(seconds), "--warmup", str(warmup), "--json", "--quiet"]
    if not workers:
        out, _, _ = measure(["taskset", "-c", "0", sluice] + args)
        return json.loads(out.strip().splitlines()[-1])
    rest = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)) if c != 0) or "0"
    args += ["--workers", str(workers)]
    cmd = ["timeout", "300", "mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
           "-np", "1", "taskset", "-c", "0", sluice] + args + [":", "-np", str(workers), "taskset", "-c", rest, sluice] + args
    out, _, _ = measure(cmd, env={"OMPI_MCA_btl_vader_single_copy_mechanism": "none"})
    tr, ws = None, []
    for line in out.strip().splitlines():
        if line.startswith("{") and '"role": "trainer"' in line:
            tr = json.loads(line)
        elif line.startswith("{") and '"role": "worker"' in line:
            ws.append(json.loads(line))
    if tr:
        # the workers' CPU over their whole serve (start and drain included) and what they sent
        tr["worker_cpu_seconds"] = sum(w.get("cpu_seconds", 0) for w in ws)
        tr["worker_sent"] = sum(w.get("elements", 0) for w in ws)
        return tr
    raise SystemExit("bench: no trainer line from %s:\n%s" % (" ".join(cmd), out[-1000:]))


def bench_mpi(sluice, quick, workdir):
    """Offloading the imagenet pipeline to worker ranks (docs/distributed.md): a trainer rank pinned to core 0
    consuming it alone and with 1 and 2 worker ranks on the other core(s), measured alternately (medians), beside
    `sluice optimize --workers K`'s cut and prediction; the link's bandwidth as the trainer measures it (workers
    serving cached decoded images, the trainer only receiving); and the model's prediction for 8 and 32 workers
    with that link. None when mpirun or an MPI build is missing."""
    if not shutil.which("mpirun") or not shutil.which("taskset"):
        log("MPI offload skipped: mpirun or taskset not found (make deps installs openmpi-bin)")
        return None
    out, _, _ = run_cmd([sluice, "run", "--help"])
    if "--workers" not in out:
        log("MPI offload skipped: sluice built without MPI")
        return None
    seconds, warmup, reps, tsec = (1.0, 0.5, 1, "1") if quick else (3.0, 1.0, 3, "4")
    spec = with_data(json.load(open(os.path.join(TOP, "bench/pipelines/imagenet.json"))), quick)
    base = os.path.join(workdir, "mpi-imagenet.json")
    json.dump(spec, open(base, "w"), indent=1)
    # The link: 64 images decoded, cropped and normalised once, cached and repeated on the workers; the trainer
    # does nothing but receive (602 kB per element), so its bytes/s is the transport's rate, receive CPU included.
    link_spec = copy.deepcopy(spec)
    link_spec["ops"] = [o for o in link_spec["ops"] if o["op"] not in ("repeat", "shuffle", "batch", "prefetch", "random_flip")]
    k = next(i for i, o in enumerate(link_spec["ops"]) if o["op"] == "interleave")
    link_spec["ops"][k + 1:k + 1] = [{"op": "take", "count": 8}]  # a cache filled within the warm-up
    link_spec["ops"] += [{"op": "cache"}, {"op": "repeat"}, {"op": "offload"}]
    link_p = os.path.join(workdir, "mpi-link.json")
    json.dump(link_spec, open(link_p, "w"), indent=1)
    log("MPI offload: link")
    lr = [mpi_trainer_run(sluice, link_p, 1, seconds, warmup + 1.0) for _ in range(reps)]
    link_bps = statistics.median(r["mb_per_second"] for r in lr) * 1e6
    gbps = link_bps * 8 / 1e9
    # What receiving costs the trainer: its bytes per CPU second of its own in the same runs (the model charges it
    # to the trainer's cores: on loopback and TCP the receive and unpack are the trainer's work).
    recv_bps = statistics.median(r["bytes"] / r["cpu_seconds"] for r in lr if r.get("cpu_seconds"))
    # What sending costs a worker: its bytes sent per CPU second of its own (it only reads its cache, packs and
    # sends; the link elements are all alike, so its bytes are its count times the trainer's bytes per element).
    send_bps = statistics.median(r["worker_sent"] * r["bytes"] / r["elements"] / r["worker_cpu_seconds"]
                                 for r in lr if r.get("worker_cpu_seconds") and r["elements"])
    res = {"link_bytes_per_second": link_bps, "link_runs": [r["mb_per_second"] for r in lr],
           "recv_bytes_per_cpu_second": recv_bps, "send_bytes_per_cpu_second": send_bps, "configs": [],
           "load_average": [os.getloadavg()],
           "predictions": [], "reps": reps, "seconds": seconds}

    def optimize(k, worker_cores, path):
        cmd = ["taskset", "-c", "0", sluice, "optimize", base, "--workers", str(k), "--trainer-cores", "1",
               "--worker-cores", "%.6g" % worker_cores, "--link-gbps", "%.6g" % gbps, "--seconds", tsec, "--json"]
        if MPI_RECV_CHARGED:
            cmd[-3:-3] = ["--recv-gbps", "%.6g" % (recv_bps * 8 / 1e9), "--send-gbps", "%.6g" % (send_bps * 8 / 1e9)]
        out, _, _ = measure(cmd + (["-o", path] if path else []))
        o = json.loads(out.strip().splitlines()[-1])
        o["command"] = " ".join(["sluice"] + cmd[4:])
        return o

    # Plans for the measured layouts: the K workers share the one other core (cores/K each).
    other = max(len(os.sched_getaffinity(0)) - 1, 1)
    plans, paths = {}, {0: base}
    for k in MPI_WORKERS:
        log("MPI offload: optimize --workers %d" % k)
        paths[k] = os.path.join(workdir, "mpi-cut%d.json" % k)
        plans[k] = optimize(k, other / k, paths[k])
        if plans[k]["cut"] == 0:  # no cut pays: measure the layout anyway, cut where the planner would ship least
            paths[k] = None
    runs = {k: [] for k in paths}
    log("MPI offload: alternating runs")
    for _ in range(reps):
        for k in paths:
            if paths[k]:
                runs[k].append(mpi_trainer_run(sluice, paths[k], k, seconds, warmup))
    for k in paths:
        rs = runs[k]
        c = {"workers": k, "elements_per_second": statistics.median(r["elements_per_second"] for r in rs) if rs else None,
             "examples_per_second": statistics.median(r["examples_per_second"] for r in rs) if rs else None,
             "trainer_cpu_per_element": statistics.median(r["cpu_seconds"] / max(r["elements"], 1) for r in rs) if rs else None,
             "runs": [r["elements_per_second"] for r in rs]}
        if k and rs:
            # the workers' CPU per output element: per element sent times the sent per output element (the cut
            # is above the batch: a trainer's examples per element)
            c["worker_cpu_per_element"] = statistics.median(
                r["worker_cpu_seconds"] / max(r["worker_sent"], 1) * r["examples"] / max(r["elements"], 1) for r in rs)
        if k:
            c["plan"] = plans[k]
        res["configs"].append(c)
    for k in MPI_PREDICT:
        log("MPI offload: model for %d workers" % k)
        res["predictions"].append(dict(optimize(k, 1, None), workers_max=k))
    res["load_average"].append(os.getloadavg())
    return res


def mpi_report(mp, m):
    """The "## Offloading to worker ranks (MPI)" section from bench_mpi's results."""
    L = ["## Offloading to worker ranks (MPI, `docs/distributed.md`)\n"]
    L.append("The imagenet pipeline (batches of 64) with a trainer rank pinned to core 0 (`taskset -c 0`) and 0, 1 or 2 "
             "worker ranks pinned to the other core(s): `mpirun -np 1 taskset -c 0 sluice run CUT --workers K : -np K "
             "taskset -c 1 sluice run CUT --workers K`, CUT the spec `sluice optimize --workers K` wrote. Trainer "
             "throughput, median of %d alternating runs of %s s. **On %d cores this shows the mechanism, not scale**: "
             "all workers share one core, and the trainer's core is shared with the transport. The plans are for these "
             "layouts (`--trainer-cores 1 --worker-cores %s/K`).\n" % (mp["reps"], fmt(mp["seconds"], 0), m["affinity"],
                                                                       max(m["affinity"] - 1, 1)))
    L.append("Link: %s MB/s (%s Gb/s), the trainer's received bytes/s with 1 worker serving cached decoded images "
             "(the trainer does nothing else; runs: %s MB/s); the trainer received %s MB per CPU second of its own, the "
             "worker sent %s MB per CPU second of its own. The plans use all three (`--link-gbps`, `--recv-gbps`, "
             "`--send-gbps`: receiving is charged to the trainer's core, sending to the workers'). Load average at start "
             "/ end: %s / %s (CPU figures are disturbed less than rates by the machine's other work). The workers' CPU is "
             "their whole serve (MPI's start, the pipeline's start and the shuffle's filling included) per element sent, "
             "times the 64 sent per output element.\n" % (
                 fmt(mp["link_bytes_per_second"] / 1e6), fmt(mp["link_bytes_per_second"] * 8 / 1e9, 2),
                 ", ".join(fmt(x) for x in mp["link_runs"]), fmt(mp.get("recv_bytes_per_cpu_second", 0) / 1e6),
                 fmt(mp.get("send_bytes_per_cpu_second", 0) / 1e6),
                 " ".join("%.2f" % x for x in (mp.get("load_average") or [[]])[0]) or "-",
                 " ".join("%.2f" % x for x in (mp.get("load_average") or [[], []])[-1]) or "-"))
    L.append("| worker ranks | cut (before ops[i]) | bytes/element shipped | trainer CPU ms/element: model / measured "
             "| workers' CPU ms/element: model / measured | predicted elements/s (limit) | measured elements/s "
             "| predicted / measured |")
    L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in mp["configs"]:
        p = c.get("plan")
        if not p:
            L.append("| 0 (trainer alone) | - | - | - / %s | | | %s | |" % (
                fmt((c["trainer_cpu_per_element"] or 0) * 1000), fmt(c["elements_per_second"])))
            continue
        pr = p["predicted"]
        L.append("| %d | %s | %s | %s / %s | %s / %s | %s (%s) | %s | %s |" % (
            c["workers"], p["cut"] or "none", fmt(p["bytes_per_element"], 0), fmt(p["trainer_cpu_per_element"] * 1000),
            fmt((c["trainer_cpu_per_element"] or 0) * 1000) if c["elements_per_second"] else "-",
            fmt(p["worker_cpu_per_element"] * 1000) if p["cut"] else "-",
            fmt((c.get("worker_cpu_per_element") or 0) * 1000) if c.get("worker_cpu_per_element") else "-",
            fmt(pr), p["limit"],
            fmt(c["elements_per_second"]) if c["elements_per_second"] else "not run (no cut)",
            fmt(ratio(pr, c["elements_per_second"]), 2)))
    L.append("")
    L.append("The model beyond this machine, with the per-element costs traced here and the link above, one core per "
             "rank (`--trainer-cores 1 --worker-cores 1`):\n")
    L.append("| workers at most | cut | workers needed | bytes/element | worker / trainer CPU ms/element | predicted elements/s | limit |")
    L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in mp["predictions"]:
        L.append("| %d | %s | %d | %s | %s / %s | %s | %s |" % (
            p["workers_max"], p["cut"] or "none", p["workers"], fmt(p["bytes_per_element"], 0),
            fmt(p["worker_cpu_per_element"] * 1000), fmt(p["trainer_cpu_per_element"] * 1000), fmt(p["predicted"]), p["limit"]))
    L.append("\nCommands: %s.\n" % "; ".join("`%s`" % p["command"].replace(os.path.join(TOP, ""), "") for p in mp["predictions"]))
    return L
