"""One run of a small TFX pipeline (tfx 1.16, LocalDagRunner, SQLite metadata) for `make test-tfx`.

Pipeline "tfx-a": CsvExampleGen (span pattern span-{SPAN}/*: the newest span) -> StatisticsGen -> SchemaGen ->
ExampleValidator -> Transform -> Trainer -> Evaluator (binary accuracy >= 0.8) -> Pusher.
Pipeline "tfx-b": CsvExampleGen -> StatisticsGen -> SchemaGen -> ExampleValidator -> ShouldTrain (the gate: runs
`sluice prov should-train` on this pipeline's own store) -> [Trainer -> Pusher, only when the gate says train];
the Trainer reads the two newest spans through a Resolver (a rolling window).

usage: pipeline.py --root DIR --pipeline tfx-a|tfx-b --sluice PATH [--fail-trainer] [--threshold T] [--nonce N]
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow_model_analysis as tfma  # noqa: E402
from tfx import v1 as tfx  # noqa: E402
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter  # noqa: E402
from tfx.dsl.component.experimental.decorators import component  # noqa: E402
from tfx.types import standard_artifacts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@component
def ShouldTrain(anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
                decision: OutputArtifact[standard_artifacts.String],
                store: Parameter[str], pipeline: Parameter[str], sluice: Parameter[str],
                threshold: Parameter[float], nonce: Parameter[str]) -> None:
    """The should-train gate: where the Trainer would start (after this run's ExampleGen and validator recorded),
    asks sluice whether a model trained now is likely to be pushed. Exit 0: train, 10: skip. A pipeline with no
    graphlet yet (its first run) has no history: sluice says train with P(push) null. Any other failure of sluice
    trains too (the gate must not stop a pipeline), saying why. `nonce` differs per run so the gate is never CACHED
    (it must look at the store as it is now)."""
    del anomalies, nonce  # an input only to order the gate after the validator
    cmd = [sluice, "prov", "should-train", store, "--pipeline", pipeline, "--threshold", str(threshold), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode in (0, 10):
        d = json.loads(r.stdout)
        train, p = r.returncode == 0, d.get("p_push")
        p = -1.0 if p is None else float(p)  # null: the pipeline has never trained, so sluice says train
    else:
        train, p = True, -1.0
        print("ShouldTrain: no decision (%s); training" % r.stderr.strip(), file=sys.stderr)
    decision.set_int_custom_property("train", 1 if train else 0)
    decision.set_float_custom_property("p_push", p)
    decision.set_string_custom_property("sluice_rc", str(r.returncode))


def build(a):
    root = os.path.abspath(a.root)
    name = a.pipeline
    data = os.path.join(root, "data", name)
    store = os.path.join(root, "metadata.sqlite")
    module = os.path.join(HERE, "model_module.py")
    ex = tfx.components.CsvExampleGen(
        input_base=data,
        input_config=tfx.proto.Input(splits=[tfx.proto.Input.Split(name="all", pattern="span-{SPAN}/*")]),
        output_config=tfx.proto.Output(split_config=tfx.proto.SplitConfig(splits=[
            tfx.proto.SplitConfig.Split(name="train", hash_buckets=3),
            tfx.proto.SplitConfig.Split(name="eval", hash_buckets=1)])))
    stats = tfx.components.StatisticsGen(examples=ex.outputs["examples"])
    schema = tfx.components.SchemaGen(statistics=stats.outputs["statistics"])
    val = tfx.components.ExampleValidator(statistics=stats.outputs["statistics"], schema=schema.outputs["schema"])
    push_dir = os.path.join(root, "serving", name)
    comps = [ex, stats, schema, val]
    cfg = {"fail": bool(a.fail_trainer)}
    if name == "tfx-a":
        tr = tfx.components.Transform(examples=ex.outputs["examples"], schema=schema.outputs["schema"],
                                      module_file=module)
        trainer = tfx.components.Trainer(module_file=module, examples=tr.outputs["transformed_examples"],
                                         transform_graph=tr.outputs["transform_graph"],
                                         schema=schema.outputs["schema"], custom_config=cfg,
                                         train_args=tfx.proto.TrainArgs(num_steps=40),
                                         eval_args=tfx.proto.EvalArgs(num_steps=5))
        eval_config = tfma.EvalConfig(
            model_specs=[tfma.ModelSpec(label_key="label", signature_name="serving_default")],
            slicing_specs=[tfma.SlicingSpec()],
            metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(
                class_name="BinaryAccuracy",
                threshold=tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.8})))])])
        ev = tfx.components.Evaluator(examples=ex.outputs["examples"], model=trainer.outputs["model"],
                                      eval_config=eval_config)
        pusher = tfx.components.Pusher(model=trainer.outputs["model"], model_blessing=ev.outputs["blessing"],
                                       push_destination=tfx.proto.PushDestination(
                                           filesystem=tfx.proto.PushDestination.Filesystem(base_directory=push_dir)))
        comps += [tr, trainer, ev, pusher]
    else:
        gate = ShouldTrain(anomalies=val.outputs["anomalies"], store=store, pipeline=name, sluice=a.sluice,
                           threshold=a.threshold, nonce=a.nonce)
        # The Trainer reads a rolling window of the two newest spans (a Resolver with SpanRangeStrategy), so a run
        # re-reads the span the run before it read: the re-processed input `prov overlap` measures.
        window = tfx.dsl.Resolver(
            strategy_class=tfx.dsl.experimental.SpanRangeStrategy,
            config={"range_config": tfx.proto.RangeConfig(rolling_range=tfx.proto.RollingRange(num_spans=2))},
            examples=tfx.dsl.Channel(type=standard_artifacts.Examples, producer_component_id=ex.id)).with_id("window")
        comps += [gate, window]
        with tfx.dsl.Cond(gate.outputs["decision"].future()[0].custom_property("train") == 1):
            trainer = tfx.components.Trainer(module_file=module, examples=window.outputs["examples"],
                                             schema=schema.outputs["schema"], custom_config=cfg,
                                             train_args=tfx.proto.TrainArgs(num_steps=40),
                                             eval_args=tfx.proto.EvalArgs(num_steps=5))
            pusher = tfx.components.Pusher(model=trainer.outputs["model"],
                                           push_destination=tfx.proto.PushDestination(
                                               filesystem=tfx.proto.PushDestination.Filesystem(
                                                   base_directory=push_dir)))
        comps += [trainer, pusher]
    return tfx.dsl.Pipeline(
        pipeline_name=name, pipeline_root=os.path.join(root, "pipelines", name), components=comps,
        enable_cache=True,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(store),
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--pipeline", required=True, choices=["tfx-a", "tfx-b"])
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--fail-trainer", action="store_true")
    ap.add_argument("--threshold", type=float, default=0.6)
    ap.add_argument("--nonce", default="0")
    a = ap.parse_args()
    tfx.orchestration.LocalDagRunner().run(build(a))


if __name__ == "__main__":
    main()
