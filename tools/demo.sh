#!/usr/bin/env bash
# tools/demo.sh: the main job on a small generated dataset (make demo). Both halves of sluice, end to end:
#  1. an ImageNet-like TFRecord dataset, the imagenet pipeline run as written, then `sluice optimize` (trace, LP plan,
#     rewrite, measured), the analyzer's report, and the tuned spec run;
#  2. a TFX-like production-pipeline history: wasted compute, the deployment predictor, the pruning simulation and
#     the should-train gate. Everything goes under data/demo/ (git-ignored).
set -euo pipefail
SL=${1:-build/sluice}
D=data/demo
mkdir -p "$D"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. generate 384 ImageNet-like JPEG records (TFRecord of tf.Example)"
"$SL" gen imagenet --out data/imagenet --n 384 --shards 4 --seed 1

# examples/imagenet.json, repeated over the small dataset so that it streams for as long as it is measured
cat > "$D/imagenet.json" <<'J'
{
  "name": "imagenet-demo",
  "seed": 42,
  "ops": [
    {"op": "files", "glob": "data/imagenet/train-*.tfrecord", "shuffle": true},
    {"op": "repeat"},
    {"op": "interleave", "cycle_length": 4, "parallelism": "autotune", "source": [{"op": "tfrecord"}]},
    {"op": "shuffle", "buffer": 256},
    {"op": "map", "fn": "parse_example", "parallelism": "autotune",
     "args": {"features": {"image/encoded": {"dtype": "bytes"}, "image/class/label": {"dtype": "int64"}}}},
    {"op": "map", "fn": "decode_jpeg", "parallelism": "autotune", "args": {"component": "image/encoded"}},
    {"op": "map", "fn": "random_resized_crop", "parallelism": "autotune", "args": {"size": [224, 224]}},
    {"op": "map", "fn": "random_flip", "args": {}},
    {"op": "map", "fn": "normalize", "parallelism": "autotune", "args": {}},
    {"op": "batch", "size": 64, "drop_remainder": true},
    {"op": "prefetch", "buffer": "autotune"}
  ]
}
J

say "run the imagenet pipeline as written (knobs 'autotune' = documented defaults), 6 s"
"$SL" run "$D/imagenet.json" --seconds 6 --warmup 1 --quiet

say "sluice optimize: trace, solve the LP, rewrite, run the plan (recorded in $D/runs.db)"
"$SL" optimize "$D/imagenet.json" -o "$D/imagenet.tuned.json" --seconds 4 --measure 5 --report \
  --record "$D/runs.db"

say "run the tuned spec, 6 s"
"$SL" run "$D/imagenet.tuned.json" --seconds 6 --warmup 1 --quiet --record "$D/runs.db"

say "2. a production-pipeline history in ML Metadata's schema: 60 pipelines over 90 days"
rm -f "$D/tfx.db"
"$SL" prov gen "$D/tfx.db" --pipelines 60 --days 90 --seed 1

say "where the compute went, and how much trained models that never shipped"
"$SL" prov waste "$D/tfx.db" --top 5

say "train the deployment predictor (XGBoost random forest, time-ordered split)"
"$SL" prov train "$D/tfx.db" -o "$D/model.json"

say "replay the test window: wasted compute saved vs freshness kept"
"$SL" prov simulate "$D/tfx.db" --model "$D/model.json"

say "the gate an orchestrator calls before training (exit 0: train, 10: skip)"
P=$("$SL" prov ls "$D/tfx.db" contexts --type pipeline --json | grep -o '"name": *"[^"]*"' | head -1 | sed 's/.*: *"//; s/"$//')
set +e
"$SL" prov should-train "$D/tfx.db" --pipeline "$P" --model "$D/model.json"
echo "(exit code $?)"
set -e

say "sluice's own runs, recorded in $D/runs.db"
"$SL" prov ls "$D/runs.db" executions
