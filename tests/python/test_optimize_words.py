# test_optimize_words.py: optimize() from Python says what limits the pipeline in words (the analyzer's bottleneck
# sentence, what binds the bound, the what-ifs) and labels its figures: batches/s for a batching pipeline, with the
# same figures in examples/s.
import sluice


def batched(size=8):
    return {"name": "words", "ops": [{"op": "range", "stop": 2000000},
                                     {"op": "map", "fn": "spin", "parallelism": "autotune", "args": {"us": 20}},
                                     {"op": "batch", "size": size},
                                     {"op": "prefetch", "buffer": "autotune"}]}


def test_optimize_gives_the_bottleneck_sentence_and_units():
    p = sluice.Pipeline(batched())
    s = p.optimize(seconds=0.5, cores=2)
    assert s["bottleneck"].startswith("Bottleneck: ops[1] (map spin)"), s["sentences"]
    assert any(t.startswith("Bound:") for t in s["sentences"])
    assert s["limit"] in ("cpu", "sequential", "disk", "wait", "serial", "none")
    assert "plus_one_core" in s["whatif"]
    assert s["unit"] == "batches/s" and s["examples_per_element"] == 8
    for k in ("baseline", "predicted", "bound"):
        assert s["examples"][k] == s[k] * 8


def test_an_unbatched_pipeline_counts_elements():
    spec = batched()
    del spec["ops"][2]
    s = sluice.Pipeline(spec).optimize(seconds=0.5, cores=2)
    assert s["unit"] == "elements/s" and s["examples_per_element"] == 1
