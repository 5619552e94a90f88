#!/usr/bin/env python3
"""bench/formats.py: issue 36's format benchmark. One set of images (`sluice gen imagenet`, the same seed) in three
layouts: TFRecord shards, an image folder and WebDataset tar shards; then, alternating in rounds on the same files
and cores, the imagenet plan (`sluice optimize` of the suite's imagenet spec with every knob on autotune, written
for each layout's reader) on each layout, torchvision's ImageFolder + DataLoader on the folder and the webdataset
library + DataLoader on the shards (bench/peers/torch_formats.py: PIL, RandomResizedCrop 224, flip, normalize,
batch 64, best of num_workers 0/1/2), where a Python with them is found (the bench peers venv, else Debian's
python3 for torchvision). Splices its section, "## Image formats", into BENCHMARKS.md (or --out); bench/run calls
it too.

usage: bench/formats.py [SLUICE] [--quick] [--out FILE] [--peers-python PY]
"""
import argparse, json, os, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# bench/run's helpers (measure, run_spec, autotuned, med_range, fmt, log, splice_section): its sections' modules
sys.path.insert(0, HERE)
from sections import base as B, pipelines as P  # noqa: E402

TOP = B.TOP

SIZES = ((384, 4), (1536, 8))  # quick, full: images and shards (shards: enough for 2 DataLoader workers each)
ROUNDS = (2, 3)
SECONDS = ((2.0, 1.0, 1.0), (8.0, 2.0, 3.0))  # quick, full: measured s, sluice's warm-up s, a peer's warm-up s
LAYOUTS = ("tfrecord", "folder", "tar")
HEAD = "## Image formats"


def data_dir(quick):
    return os.path.join(TOP, "bench/data/formats" + ("-quick" if quick else ""))


def gen_layouts(sluice, quick):
    """The same images in the three layouts (a marker per layout says which options made it)."""
    n, shards = SIZES[1 if not quick else 0]
    info = {}
    for layout in LAYOUTS:
        d = os.path.join(data_dir(quick), layout)
        marker = os.path.join(d, ".sluice-gen")
        want = "imagenet format=%s n=%d shards=%d seed=%d" % (layout, n, shards, B.SEED)
        if os.path.exists(marker) and open(marker).read().strip() == want:
            info[layout] = open(marker + ".summary").read().strip() if os.path.exists(marker + ".summary") else ""
            continue
        shutil.rmtree(d, ignore_errors=True)
        B.log("formats: generating %d images as %s in %s" % (n, layout, os.path.relpath(d, TOP)))
        out, err, rc = B.run_cmd([sluice, "gen", "imagenet", "--format", layout, "--out", d, "--n", str(n), "--shards",
                                  str(shards), "--seed", str(B.SEED), "--quiet"])
        if rc:
            raise SystemExit("bench: sluice gen --format %s failed: %s" % (layout, err))
        info[layout] = out.strip().splitlines()[0]
        # the marker is not a class folder: a hidden name, which ImageFolder and image_folder skip
        open(marker, "w").write(want + "\n")
        open(marker + ".summary", "w").write(info[layout] + "\n")
    return n, shards, info


def layout_spec(layout, quick):
    """The suite's imagenet spec reading `layout` instead of TFRecords (the same ops after the reader), endless."""
    spec = json.load(open(os.path.join(TOP, "bench/pipelines/imagenet.json")))
    d = os.path.relpath(os.path.join(data_dir(quick), layout), TOP)
    ops = spec["ops"]
    tail = [o for o in ops if o["op"] not in ("files", "interleave") and o.get("fn") != "parse_example"]
    decode = next(o for o in tail if o.get("fn") == "decode_jpeg")
    if layout == "tfrecord":
        head = [{"op": "files", "glob": d + "/*.tfrecord", "shuffle": True}, {"op": "repeat"}, ops[1]]
        tail = [o for o in ops[2:]]
    elif layout == "folder":
        head = [{"op": "image_folder", "root": d, "shuffle": True}, {"op": "repeat"}]
        decode["args"]["component"] = "image/encoded"
    else:
        head = [{"op": "files", "glob": d + "/*.tar", "shuffle": True}, {"op": "repeat"},
                dict(ops[1], source=[{"op": "tar"}])]
        decode["args"]["component"] = "jpg"
        tail.insert(1, {"op": "map", "fn": "parse_int", "args": {"component": "cls", "output": "label"}})
    spec["ops"] = head + tail
    spec["name"] = "imagenet-" + layout
    return spec


def peers_python(sluice, explicit):
    """(python, has webdataset) for the peers: --peers-python, the peers venv, else Debian's python3."""
    cands = [explicit] if explicit else [os.path.join(os.path.dirname(sluice), "peers-venv", "bin", "python"),
                                         "/usr/bin/python3"]
    for py in cands:
        if not py or not os.path.exists(py):
            continue
        if subprocess.run([py, "-c", "import torch, torchvision, PIL"], capture_output=True).returncode:
            continue
        return py, subprocess.run([py, "-c", "import webdataset"], capture_output=True).returncode == 0
    return None, False


def bench_formats(sluice, quick, workdir, peers_py=None):
    n, shards, info = gen_layouts(sluice, quick)
    seconds, swarm, pwarm = SECONDS[1 if not quick else 0]
    plans = {}
    for layout in LAYOUTS:
        src = os.path.join(workdir, "formats-%s-src.json" % layout)
        json.dump(P.autotuned(layout_spec(layout, quick)), open(src, "w"), indent=1)
        plans[layout] = os.path.join(workdir, "formats-%s.json" % layout)
        B.log("formats: sluice optimize (%s)" % layout)
        B.measure([sluice, "optimize", src, "-o", plans[layout], "--json", "--seconds", "3",
                   "--measure", "1" if quick else "3"])
    py, wds = peers_python(sluice, peers_py)
    peers = []
    if py:
        peers.append(("torchvision ImageFolder + DataLoader", "folder", os.path.join(data_dir(quick), "folder")))
        if wds:
            peers.append(("webdataset + DataLoader", "tar", os.path.join(data_dir(quick), "tar", "*.tar")))
    missing = []
    if not py:
        missing.append("torchvision ImageFolder and webdataset: no Python with torch and torchvision (make bench-peers)")
    elif not wds:
        missing.append("webdataset: not installed in %s (make bench-peers installs it)" % py)
    runs = {k: [] for k in list(LAYOUTS) + [p[0] for p in peers]}
    info_peers, failed = {}, {}
    for rnd in range(ROUNDS[1 if not quick else 0]):
        B.log("formats: round %d" % (rnd + 1))
        for layout in LAYOUTS:
            runs[layout].append(P.run_spec(sluice, plans[layout], seconds, swarm))
        for label, layout, files in peers:
            if label in failed:
                continue
            cmd = [py, os.path.join(HERE, "peers", "torch_formats.py"), "--layout", layout, "--files", files,
                   "--seconds", str(seconds), "--warmup", str(pwarm), "--workers", "0,1,2"]
            try:
                out, cpu, rss = B.measure(cmd, timeout=900)
                r = json.loads(out.strip().splitlines()[-1])
            except (SystemExit, ValueError, IndexError) as e:
                failed[label] = str(e).strip().splitlines()[-1][:300]
                B.log("formats: %s failed: %s" % (label, failed[label]))
                continue
            info_peers[label] = {"version": "%s, torch %s" % (r["version"], r["torch"])}
            runs[label].append({"eps": r["examples_per_second"], "cpu_per_example": r["cpu_seconds"] / max(r["examples"], 1),
                                "workers": r["workers"], "rss_kb": rss})
    res = {"images": n, "shards": shards, "gen": info, "rounds": len(runs["tfrecord"]), "seconds": [seconds, swarm, pwarm],
           "load_average": os.getloadavg(), "affinity": sorted(os.sched_getaffinity(0)), "missing": missing,
           "failed": failed, "systems": []}
    for key in list(LAYOUTS) + [p[0] for p in peers]:
        rs = runs[key]
        if not rs:
            continue
        row = {"key": key, "examples_per_second": B.median_of(rs, "eps"),
               "cpu_per_example": B.median_of(rs, "cpu_per_example"), "peak_rss_mb": B.median_of(rs, "rss_kb") / 1024,
               "runs": [r["eps"] for r in rs]}
        if key in info_peers:
            row.update(info_peers[key], workers=[r["workers"] for r in rs])
        res["systems"].append(row)
    # ratios within each round: the two runs of a pair are close in time, so a drift of the machine cancels
    def per_round(a, b):
        return [x["eps"] / y["eps"] for x, y in zip(runs.get(a, []), runs.get(b, [])) if y["eps"]]
    res["ratios"] = {"folder/tfrecord": per_round("folder", "tfrecord"), "tar/tfrecord": per_round("tar", "tfrecord")}
    for label, layout, _ in peers:
        res["ratios"]["%s/%s" % (layout, label)] = per_round(layout, label)
    return res


TARGETS = {"folder/tfrecord": ">= 0.95", "tar/tfrecord": ">= 0.95",
           "folder/torchvision ImageFolder + DataLoader": ">= 2.0", "tar/webdataset + DataLoader": ">= 2.0"}


def section_start(head, issue, quick):
    """A section's first lines: its heading (with its issue), and the quick runs' warning."""
    L = [head + " (issue %d)\n" % issue]
    if quick:
        L.append("**Quick smoke run: tiny data and very short runs; these figures are not meaningful.**\n")
    return L


def formats_report(r, m, quick):
    fmt, L = B.fmt, section_start(HEAD, 36, quick)
    s, sw, pw = r["seconds"]
    L.append("The same %d images (`sluice gen imagenet --seed %d`, %d shards where the layout has shards) as TFRecord "
             "shards, an image folder (`root/<class>/<n>.jpg`) and WebDataset tar shards (`<key>.jpg`, `<key>.cls`), "
             "written by `bench/formats.py`. sluice runs the imagenet plan on each: `sluice optimize` of "
             "`bench/pipelines/imagenet.json` with every knob on autotune and the reader of that layout "
             "(`tfrecord` + `parse_example`, `image_folder`, `tar` + `parse_int`). The peers read the same folder "
             "and shards through PyTorch's DataLoader (`bench/peers/torch_formats.py`: PIL, RandomResizedCrop 224, "
             "flip, normalize, batch 64; the best of num_workers 0/1/2 in each round). Runs alternate in %d rounds, "
             "each a separate process measured for %s s after a warm-up of %s s (sluice) or %s s (peers, per "
             "num_workers setting), on the same %d cores (CPUs %s). examples/s and CPU ms/example (all threads and "
             "worker processes) are medians of the rounds; the ratios are taken within each round: median "
             "(smallest-largest). Measured %s at commit %s; load average at the end: %s (the machine is shared: "
             "other sessions' load moves these figures).\n" % (
                 r["images"], B.SEED, r["shards"], r["rounds"], fmt(s, 0), fmt(sw, 0), fmt(pw, 0), len(r["affinity"]),
                 ",".join(map(str, r["affinity"])), m["date"], m["commit"], " ".join("%.2f" % x for x in r["load_average"])))
    L.append("| layout | reader | version | examples/s | CPU ms/example | peak RSS MB |")
    L.append("| --- | --- | --- | ---: | ---: | ---: |")
    for row in r["systems"]:
        k = row["key"]
        if k in LAYOUTS:
            reader = {"tfrecord": "sluice plan (tfrecord)", "folder": "sluice plan (image_folder)",
                      "tar": "sluice plan (tar)"}[k]
            L.append("| %s | %s | this commit | %s | %s | %s |" % (k, reader, fmt(row["examples_per_second"]),
                     fmt(row["cpu_per_example"] * 1000, 3), fmt(row["peak_rss_mb"], 0)))
        else:
            layout = "folder" if "ImageFolder" in k else "tar"
            L.append("| %s | %s (num_workers %s) | %s | %s | %s | %s |" % (
                layout, k, "/".join(str(w) for w in row["workers"]), row["version"], fmt(row["examples_per_second"]),
                fmt(row["cpu_per_example"] * 1000, 3), fmt(row["peak_rss_mb"], 0)))
    L.append("")
    L.append("| ratio (per round) | measured | target |")
    L.append("| --- | ---: | ---: |")
    for k, xs in r["ratios"].items():
        if xs:
            L.append("| %s | %s | %s |" % (k.replace("/", " / "), B.med_range(xs), TARGETS.get(k, "")))
    L.append("")
    for x in r["missing"]:
        L.append("- not measured: %s" % x)
    for label, e in sorted(r["failed"].items()):
        L.append("- %s did not run: %s" % (label, e.replace("|", "\\|")))
    if r["missing"] or r["failed"]:
        L.append("")
    return L


def save(kind, m, r, lines, quick, out, head):
    """bench/results/KIND[-quick].json, and the section `head` spliced into out (default: BENCHMARKS.md, or the
    quick runs' file)."""
    os.makedirs(os.path.join(TOP, "bench/results"), exist_ok=True)
    json.dump({"machine": m, kind: r}, open(os.path.join(TOP, "bench/results", "%s%s.json" % (
        kind, "-quick" if quick else "")), "w"), indent=1)
    out = out or os.path.join(TOP, "BENCHMARKS.md" if not quick else "bench/results/BENCHMARKS-quick.md")
    B.splice_section(out, lines, head)
    B.log("wrote the %s section of %s" % (head.lstrip("# "), out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sluice", nargs="?", default=os.path.join(TOP, "build/sluice"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--peers-python", default=None, help="a Python with torch, torchvision (and webdataset)")
    a = ap.parse_args()
    sluice = os.path.abspath(a.sluice)
    m = B.machine()
    workdir = tempfile.mkdtemp(prefix="sluice-formats-")
    try:
        r = bench_formats(sluice, a.quick, workdir, a.peers_python)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    save("formats", m, r, formats_report(r, m, a.quick), a.quick, a.out, HEAD)


if __name__ == "__main__":
    main()
