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


def test_a_measured_optimize_gives_the_spread_of_its_runs():
    # measured is the median of the final check's runs (3, or 5 when the first three spread more than 10%); the
    # slowest and fastest of them come with it, and are 0 when nothing was measured
    s = sluice.Pipeline(batched()).optimize(seconds=0.3, cores=2, measure=0.6)
    assert s["check_rounds"] in (3, 5), s
    assert 0 < s["measured_min"] <= s["measured"] <= s["measured_max"], s
    u = sluice.Pipeline(batched()).optimize(seconds=0.3, cores=2)
    assert u["check_rounds"] == 0 and u["measured_min"] == 0 == u["measured_max"], u
