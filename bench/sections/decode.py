"""bench/sections/decode.py: the C bench programs (engine_bench, fns_bench) and the CPU per image against a bare
decode."""
import json, os, shutil, statistics

from sections.base import DATA, SEED, SIZES, TOP, log, measure, ratio, run_cmd
from sections.pipelines import autotuned, run_spec, walk_ops, with_data


def bench_binary(path, args, quick):
    if not os.path.exists(path):
        log("%s not built: skipped" % path)
        return None
    out, cpu, rss = measure([path] + args, timeout=1800)
    return json.loads(out.strip().splitlines()[-1])


def bench_decode_ratio(sluice, bindir, quick, workdir, fns444):
    """CPU per image of the imagenet plan against a bare TurboJPEG decode loop over the same JPEGs, in this run, on
    4:4:4 and 4:2:0 JPEGs (issue 16's ratio). The plan is the spec `sluice optimize` wrote for imagenet (optimized
    here when that pipeline was not benchmarked), its glob pointed at each folder. Its CPU per image is marginal:
    (CPU of a long run - CPU of a short one) / (images of the long - of the short), both after the same warm-up, so
    start-up, optimizer-free warm-up and the pool's first fill cancel. Also the same plan with uint8 output (the
    fused op's normalize off: trainers that normalize on the accelerator). Bare: fns_bench's loop, one core."""
    n, shards, nq, sq = SIZES["imagenet"]
    if quick:
        n, shards = nq, sq
    f444 = DATA["imagenet"][1] + ("-quick" if quick else "")
    f420 = "bench/data/imagenet-420" + ("-quick" if quick else "")
    marker = os.path.join(TOP, f420, ".sluice-gen")
    want = "imagenet n=%d shards=%d seed=%d chroma=420" % (n, shards, SEED)
    if not (os.path.exists(marker) and open(marker).read().strip() == want):
        shutil.rmtree(os.path.join(TOP, f420), ignore_errors=True)
        log("generating imagenet 4:2:0 (%d records) in %s" % (n, f420))
        out, err, rc = run_cmd([sluice, "gen", "imagenet", "--out", f420, "--n", str(n), "--shards", str(shards),
                                "--seed", str(SEED), "--chroma", "420", "--quiet"])
        if rc:
            raise SystemExit("bench: sluice gen --chroma 420 failed: %s" % err)
        open(marker, "w").write(want + "\n")
    tuned = os.path.join(workdir, "imagenet.sluice.json")
    if not os.path.exists(tuned):
        spec = with_data(json.load(open(os.path.join(TOP, "bench/pipelines/imagenet.json"))), quick)
        src = os.path.join(workdir, "imagenet.ratio-autotune.json")
        json.dump(autotuned(spec), open(src, "w"), indent=1)
        measure([sluice, "optimize", src, "-o", tuned, "--json", "--seconds", "3", "--measure", "1" if quick else "3"])
    plan = json.load(open(tuned))
    paths = {}
    for ch, folder in (("444", f444), ("420", f420)):
        for out in ("f32", "u8"):
            s = json.loads(json.dumps(plan).replace(f444 + "/", folder + "/"))
            if out == "u8":
                for o in walk_ops(s["ops"]):
                    if o.get("fn") == "decode_and_crop_jpeg" and isinstance(o.get("args"), dict):
                        for k in ("normalize", "mean", "std", "value_scale"):
                            o["args"].pop(k, None)
                s["ops"] = [o for o in s["ops"] if o.get("fn") != "normalize"]  # an unfused one, if any
            p = os.path.join(workdir, "imagenet.ratio-%s-%s.json" % (ch, out))
            json.dump(s, open(p, "w"), indent=1)
            paths[(ch, out)] = p
    cpu_ms, eps, reps = marginal_cpu(sluice, paths, quick)
    bare = {"444": fns444}
    bare["420"] = bench_binary(os.path.join(bindir, "fns_bench"), [f420, "--runs", "3" if quick else "5",
                               "--max-images", "32" if quick else "200"], quick)
    res = {}
    for ch in ("444", "420"):
        b = bare.get(ch) or {}
        bare_ms = 1000.0 / b["bare_img_s"] if b.get("bare_img_s") else None
        r = {"bare_cpu_ms": bare_ms, "runs": reps, "plan_f32_eps": eps[(ch, "f32")]}
        for out in ("f32", "u8"):
            r["plan_%s_cpu_ms" % out] = cpu_ms[(ch, out)]
            r["ratio_%s" % out] = ratio(cpu_ms[(ch, out)], bare_ms)
        res[ch] = r
    return res


def marginal_cpu(sluice, paths, quick):
    """For each spec in `paths` ({key: path}): its CPU ms per example, marginal between a short and a long run after
    the same warm-up (start-up and first fills cancel), and the long runs' examples/s; medians over the repetitions,
    the specs taking turns."""
    short, long_, warmup, reps = (0.5, 1.5, 0.3, 3) if quick else (2.0, 6.0, 1.0, 3)
    marg = {k: [] for k in paths}
    rates = {k: [] for k in paths}
    for rep in range(reps):
        for k, p in paths.items():
            a = run_spec(sluice, p, short, warmup)
            b = run_spec(sluice, p, long_, warmup)
            rates[k].append(b["eps"])
            da = b["examples"] - a["examples"]
            if da > 0:
                marg[k].append((b["cpu_per_example"] * b["examples"] - a["cpu_per_example"] * a["examples"]) / da)
    cpu_ms = {k: statistics.median(v) * 1000 if v else None for k, v in marg.items()}
    eps = {k: statistics.median(v) if v else None for k, v in rates.items()}
    return cpu_ms, eps, reps


def bench_ssd_ratio(sluice, bindir, quick, workdir):
    """The same figure on ssd (boxes; about 350x300 JPEGs resized to 300x300): CPU per image of the plan `sluice
    optimize` wrote for ssd in this run (marginal, as above) against fns_bench's bare decode of the ssd JPEGs."""
    tuned = os.path.join(workdir, "ssd.sluice.json")
    if not os.path.exists(tuned):
        return None
    folder = DATA["ssd"][1] + ("-quick" if quick else "")
    cpu_ms, eps, reps = marginal_cpu(sluice, {"ssd": tuned}, quick)
    b = bench_binary(os.path.join(bindir, "fns_bench"), [folder, "--runs", "3" if quick else "5",
                     "--max-images", "32" if quick else "200"], quick) or {}
    bare_ms = 1000.0 / b["bare_img_s"] if b.get("bare_img_s") else None
    return {"bare_cpu_ms": bare_ms, "plan_cpu_ms": cpu_ms["ssd"], "ratio": ratio(cpu_ms["ssd"], bare_ms),
            "plan_eps": eps["ssd"], "runs": reps}
