# The Transform and Trainer module of tests/tfx/pipeline.py: two float features (x1, x2; span 2 on adds x3, which
# the model ignores), a 0/1 label, a one-layer Keras model trained for a few steps. Pipeline B has no Transform:
# its Trainer reads the raw examples with the SchemaGen schema. custom_config {"fail": true} makes run_fn raise,
# the FAILED Trainer of the test.
import tensorflow as tf
import tensorflow_transform as tft
from tfx import v1 as tfx
from tfx_bsl.public import tfxio
from tensorflow_metadata.proto.v0 import schema_pb2

FEATURES = ["x1", "x2"]
LABEL = "label"


def preprocessing_fn(inputs):
    out = {f + "_xf": tft.scale_to_z_score(inputs[f]) for f in FEATURES}
    out[LABEL] = inputs[LABEL]
    return out


def _model(names):
    ins = {n: tf.keras.layers.Input(shape=(1,), name=n) for n in names}
    x = tf.keras.layers.concatenate(list(ins.values()))
    outp = tf.keras.layers.Dense(1, activation="sigmoid")(x)
    m = tf.keras.Model(ins, outp)
    m.compile(optimizer=tf.keras.optimizers.Adam(0.1), loss="binary_crossentropy", metrics=["accuracy"])
    return m


def run_fn(fn_args):
    cfg = fn_args.custom_config or {}
    if cfg.get("fail"):
        raise RuntimeError("tests/tfx: this Trainer run is made to fail (custom_config fail=true)")
    opts = tfxio.TensorFlowDatasetOptions(batch_size=32, label_key=LABEL)
    if fn_args.transform_output:
        tft_out = tft.TFTransformOutput(fn_args.transform_output)
        schema = tft_out.transformed_metadata.schema
        names = [f + "_xf" for f in FEATURES]
    else:
        tft_out = None
        schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
        names = FEATURES
    train = fn_args.data_accessor.tf_dataset_factory(fn_args.train_files, opts, schema)
    evald = fn_args.data_accessor.tf_dataset_factory(fn_args.eval_files, opts, schema)
    keep = lambda f, l: ({n: f[n] for n in names}, l)
    model = _model(names)
    model.fit(train.map(keep), steps_per_epoch=fn_args.train_steps, validation_data=evald.map(keep),
              validation_steps=fn_args.eval_steps, verbose=0)
    if tft_out is None:
        model.save(fn_args.serving_model_dir, save_format="tf")
        return
    # Serving: serialized tf.Examples of the raw features, transformed by the Transform graph (what Evaluator feeds).
    model.tft_layer = tft_out.transform_features_layer()
    raw_spec = tft_out.raw_feature_spec()
    raw_spec.pop(LABEL)

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def serve(serialized):
        parsed = tf.io.parse_example(serialized, raw_spec)
        xf = model.tft_layer(parsed)
        return {"outputs": model({n: xf[n] for n in names})}

    model.save(fn_args.serving_model_dir, save_format="tf", signatures={"serving_default": serve})
