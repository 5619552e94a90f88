"""Generates the data and runs the two pipelines of tests/tfx/pipeline.py into one SQLite MLMD store, one process
per run, in this order (what each run is for):

  a1  tfx-a, span 1 (x1, x2, label)                        trains, blessed, pushed
  a2  tfx-a, span 2 adds column x3                         a new span and a schema change; pushed
  a3  tfx-a, no new data                                   every component CACHED (the Pusher re-emits a2's push)
  a4  tfx-a, span 3 with random labels                     the Evaluator's threshold fails: not blessed, not pushed
  a5  tfx-a, span 4, Trainer made to fail                  a FAILED Trainer; nothing downstream runs
  b1  tfx-b, span 1                                        the gate has no history: trains, pushed
  b2  tfx-b, span 2                                        new data: the gate trains, pushed
  b3  tfx-b, no new data                                   the gate says skip: no Trainer, no Pusher

writes ROOT/runs.json (each run: name, pipeline, seconds, exit code) for check.py.
usage: run_tfx.py --root DIR --sluice PATH
"""
import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

RUNS = [  # name, pipeline, span to add (None: no new data), data kind, trainer fails
    ("a1", "tfx-a", 1, "plain", False),
    ("a2", "tfx-a", 2, "x3", False),
    ("a3", "tfx-a", None, None, False),
    ("a4", "tfx-a", 3, "noisy", False),
    ("a5", "tfx-a", 4, "x3", True),
    ("b1", "tfx-b", 1, "plain", False),
    ("b2", "tfx-b", 2, "plain", False),
    ("b3", "tfx-b", None, None, False),
]


def write_span(root, pipeline, span, kind, rows=300):
    """A separable problem (label = x1 + x2 > 0), or random labels for "noisy"; "x3" adds a column."""
    rnd = random.Random("%s/%d" % (pipeline, span))
    d = os.path.join(root, "data", pipeline, "span-%d" % span)
    os.makedirs(d, exist_ok=True)
    cols = ["x1", "x2"] + (["x3"] if kind in ("x3", "noisy") else []) + ["label"]
    with open(os.path.join(d, "data.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for _ in range(rows):
            x1, x2 = rnd.uniform(-1, 1), rnd.uniform(-1, 1)
            label = rnd.randint(0, 1) if kind == "noisy" else int(x1 + x2 > 0)
            row = ["%.4f" % x1, "%.4f" % x2] + (["%.4f" % rnd.uniform(0, 5)] if "x3" in cols else []) + [label]
            w.writerow(row)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--threshold", type=float, default=0.6)
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONHASHSEED="0")
    out = []
    t_all = time.time()
    for name, pipe, span, kind, fail in RUNS:
        if span is not None:
            write_span(root, pipe, span, kind)
        cmd = [sys.executable, os.path.join(HERE, "pipeline.py"), "--root", root, "--pipeline", pipe,
               "--sluice", os.path.abspath(a.sluice), "--threshold", str(a.threshold), "--nonce", name]
        if fail:
            cmd.append("--fail-trainer")
        t0 = time.time()
        with open(os.path.join(root, "run-%s.log" % name), "w") as log:
            rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        secs = time.time() - t0
        print("run %s (%s): exit %d, %.0f s" % (name, pipe, rc, secs), flush=True)
        if (rc != 0) != fail:
            sys.exit("run_tfx: run %s exited %d (expected %s); see %s/run-%s.log"
                     % (name, rc, "a failure" if fail else "success", root, name))
        out.append({"name": name, "pipeline": pipe, "span": span, "kind": kind, "trainer_fails": fail,
                    "exit": rc, "seconds": round(secs, 1)})
    with open(os.path.join(root, "runs.json"), "w") as f:
        json.dump({"runs": out, "seconds": round(time.time() - t_all, 1), "threshold": a.threshold}, f, indent=1)
    print("run_tfx: %d runs in %.0f s" % (len(out), time.time() - t_all))


if __name__ == "__main__":
    main()
