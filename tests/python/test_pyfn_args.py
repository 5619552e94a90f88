# test_pyfn_args.py: Python map functions take args from the spec (declared, checked like C functions' args,
# passed as keywords) and, when random, a per-element numpy Generator derived from the pipeline's seed, the op,
# the epoch and the element's index (the seed C functions get): the same values whatever the parallelism.
import numpy as np
import pytest

import sluice


def jitter(e, sigma, rng):
    return {**e, "noise": np.float64(rng.normal(0.0, sigma))}


def scale(e, factor, name="x"):
    return {**e, "scaled": e["value"] * factor, "tag": name.encode()}


sluice.register_fn("t_jitter_py", jitter, args={"sigma": {"type": "number", "default": 1.0}}, random=True)
sluice.register_fn("t_scale_py", scale, args={"factor": {"type": "integer"}, "name": {"type": "string", "default": "x"}})


def noise(seed=3, par=1, args=None, runs=1):
    p = sluice.Pipeline({"seed": seed, "ops": [{"op": "range", "stop": 40},
                                               {"op": "map", "fn": "t_jitter_py", "parallelism": par,
                                                "args": args or {}}]})
    return [[float(e["noise"]) for e in p] for _ in range(runs)]


def test_random_python_function_follows_the_pipeline_seed():
    one = noise(par=1, runs=2)
    assert noise(par=3, runs=2) == one  # whatever the parallelism, epoch by epoch
    assert one[0] != one[1]  # each epoch draws anew
    assert noise(seed=4)[0] != one[0][:40]  # another seed, other values
    assert len(set(one[0])) == 40  # each element its own stream
    assert noise(args={"sigma": 0.0})[0] == [0.0] * 40


def test_args_are_passed_and_defaulted():
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 3}, {"op": "map", "fn": "t_scale_py",
                                                             "args": {"factor": 5}}]})
    got = [(int(e["scaled"]), e["tag"]) for e in p]
    assert got == [(0, b"x"), (5, b"x"), (10, b"x")]


@pytest.mark.parametrize("args,words", [
    ({"factor": 2, "nmae": "y"}, "ops[1].args.nmae: unknown arg for function 't_scale_py'; did you mean 'name'?"),
    ({"factor": "2"}, "ops[1].args.factor: expected an integer"),
    ({"factor": True}, "ops[1].args.factor: expected an integer"),
    ({}, "ops[1].args.factor: required by function 't_scale_py'"),
])
def test_args_are_checked_when_built(args, words):
    with pytest.raises(sluice.SpecError) as e:
        sluice.Pipeline({"ops": [{"op": "range", "stop": 3}, {"op": "map", "fn": "t_scale_py", "args": args}]})
    assert words in str(e.value)


def test_bad_declarations_are_refused():
    with pytest.raises(ValueError, match="one of number"):
        sluice.register_fn("t_bad_py", scale, args={"factor": {"type": "float"}})
    with pytest.raises(ValueError, match="default"):
        sluice.register_fn("t_bad_py", scale, args={"factor": {"type": "integer", "default": 1.5}})
