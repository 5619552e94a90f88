"""bench/sections/state.py: resumable runs (issue 37): state_bench's figures and their section."""
import json, os, re

from sections.base import TOP, fmt, log, measure, ratio


def bench_state(bindir, quick, workdir):
    """state_bench on the suite's imagenet spec (its 1,024-element shuffle, batches of 64) over one epoch of the
    benchmark's images: state size, time to take one, first element after a restore against a fresh start, epochs
    with and without a state taken every EVERY batches (alternating)."""
    sb = os.path.join(bindir, "state_bench")
    if not os.path.exists(sb):
        log("state_bench not built: skipped")
        return None
    spec = json.load(open(os.path.join(TOP, "bench/pipelines/imagenet.json")))
    if quick:
        spec = json.loads(re.sub(r'"bench/data/([a-z]+)/', r'"bench/data/\1-quick/', json.dumps(spec)))
    path = os.path.join(workdir, "state-imagenet.json")
    json.dump(spec, open(path, "w"))
    out, cpu, rss = measure([sb, path, "--cut", "10", "--every", "10", "--rounds", "3" if quick else "5"],
                            timeout=1800)
    return json.loads(out.strip().splitlines()[-1])


def state_report(st):
    L = ["## Resumable runs (issue 37)\n",
         "`build/state_bench` on the suite's imagenet spec (files shuffled, interleave, a 1,024-element shuffle, "
         "parallel random maps, batches of 64, prefetch) over the benchmark's images; a state after each of the "
         "first %d batches; first element: medians of %d alternating trials; epochs with no state and with one every "
         "%d batches, alternating (docs/state.md).\n" % (st["states"], st["rounds"], st["every"]),
         "| figure | value | target |", "| --- | ---: | ---: |",
         "| state size, median (largest) | %s KiB (%s KiB) | <= 64 KiB |" % (fmt(st["size_median"] / 1024.0),
                                                                       fmt(st["size_max"] / 1024.0)),
         "| time to take a state, median (largest) | %.3f ms (%.3f ms) | <= 1 ms |" % (st["take_ms_median"],
                                                                                 st["take_ms_max"]),
         "| first element: fresh start | %s ms | |" % fmt(st["first_ms_fresh"]),
         "| first element: restored from the state | %s ms (%s x) | <= 2 x |" % (
             fmt(st["first_ms_restored"]), fmt(ratio(st["first_ms_restored"], st["first_ms_fresh"]), 2)),
         "| epochs without states | %s batches/s | |" % fmt(st["rate_without"], 2),
         "| epochs with a state every %d batches | %s batches/s (%s x) | within noise |" % (
             st["every"], fmt(st["rate_with"], 2), fmt(ratio(st["rate_with"], st["rate_without"]), 3)),
         "| what tf.data's checkpoint holds at the same cut (bytes of the buffered elements) | %s MB | |" % fmt(
             st["held_bytes"] / 1e6),
         "",
         "The last row is computed, not measured from tf.data: the bytes the pipeline's buffers held at the cut (the "
         "shuffle's records and every batch made ahead), which tf.data's iterator checkpoint saves as elements; "
         "sluice saves refs to them instead.\n"]
    return L
