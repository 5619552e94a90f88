# test_pyfn_components.py: Python functions and the element's components (issue 38, row 3). A function that
# declares what it reads and makes (register_fn(reads=, makes=)) is checked when the pipeline is built, as a C
# function is (a read no earlier op makes is a SpecError naming the op, with "did you mean"; what it makes is known
# to the ops after it); any Python function reading a component its element lacks ends the run with a SpecError
# naming the op, the component and the components there are, never a skip under on_error "skip".
import warnings

import numpy as np
import pytest

import sluice


def double(e):
    return {**e, "twice": e["value"] * 2}


def typo(e):
    return {**e, "twice": e["valeu"] * 2}


def popper(e):
    return {"x": e.pop("vlaue")}  # pop() of a missing component is a read too


def own_dict(e):
    return {**e, "twice": {"a": 1}[str(int(e["value"]))]}  # a KeyError of its own dict: a data error


def forgets(e):
    return dict(e)


sluice.register_fn("t_double_decl", double, reads=["value"], makes={"twice": {"dtype": "int64", "shape": []}})
sluice.register_fn("t_double_typo_decl", double, reads=["valeu"])
sluice.register_fn("t_double_plain", double)
sluice.register_fn("t_typo_plain", typo)
sluice.register_fn("t_pop_plain", popper)
sluice.register_fn("t_own_dict", own_dict)
sluice.register_fn("t_forgets", forgets, makes={"twice": {}})
sluice.register_fn("t_keeps_typo", lambda e: e["vale"] > 2, filter=True)
sluice.register_fn("t_double_out", double, outputs={"twice": {"dtype": "int64", "shape": []}})


def spec(fn, after=None, on_error="error", stop=6, par=1):
    ops = [{"op": "range", "stop": stop}, {"op": "map", "fn": fn, "on_error": on_error, "parallelism": par}]
    return {"ops": ops + ([after] if after else [])}


def cast(component):
    return {"op": "map", "fn": "cast", "args": {"component": component, "dtype": "float32"}}


def test_a_declared_read_no_op_makes_is_refused_when_built():
    with pytest.raises(sluice.SpecError) as e:
        sluice.Pipeline(spec("t_double_typo_decl", on_error="skip"))
    assert ("ops[1] (map t_double_typo_decl): reads component 'valeu', which no earlier op makes (the element has: "
            "'value'); did you mean 'value'?") in str(e.value)


def test_what_a_declared_function_makes_is_checked_in_the_ops_after_it():
    assert [float(e["twice"]) for e in sluice.Pipeline(spec("t_double_decl", cast("twice")))] == [0, 2, 4, 6, 8, 10]
    with pytest.raises(sluice.SpecError, match=r"ops\[2\] \(map cast\): reads component 'twcie'.*did you mean 'twice'"):
        sluice.Pipeline(spec("t_double_decl", cast("twcie")))
    # the dtype it declares is checked too
    with pytest.raises(sluice.SpecError, match="'twice' is int64"):
        sluice.Pipeline(spec("t_double_decl", {"op": "map", "fn": "decode_jpeg", "args": {"component": "twice"}}))
    # undeclared, the same typo passes the build (the structure after the function is open)
    sluice.Pipeline(spec("t_double_plain", cast("twcie")))
    # outputs= (issue 49's name for it) declares the same
    with pytest.raises(sluice.SpecError, match=r"ops\[2\] \(map cast\): reads component 'twcie'.*did you mean 'twice'"):
        sluice.Pipeline(spec("t_double_out", cast("twcie")))
    assert [float(e["twice"]) for e in sluice.Pipeline(spec("t_double_out", cast("twice")))] == [0, 2, 4, 6, 8, 10]
    with pytest.raises(TypeError, match="not both"):
        sluice.register_fn("t_both", double, makes={"a": {}}, outputs={"a": {}})


@pytest.mark.parametrize("fn,component,par", [("t_typo_plain", "valeu", 1), ("t_typo_plain", "valeu", 3),
                                              ("t_pop_plain", "vlaue", 1)])
def test_reading_a_missing_component_ends_the_run_as_a_spec_error_under_skip(fn, component, par):
    p = sluice.Pipeline(spec(fn, on_error="skip", par=par))
    with pytest.raises(sluice.SpecError) as e:
        list(p)
    text = str(e.value)
    assert text.startswith(f"ops[1] (map {fn}), element 0: Python function '{fn}' reads component '{component}', "
                           "which the element does not have (the element has: 'value'); did you mean 'value'?"), text
    assert isinstance(e.value.__cause__, KeyError)
    assert p.stats()[1]["errors_skipped"] == 0


def test_a_filter_reading_a_missing_component_ends_the_run_too():
    p = sluice.Pipeline({"ops": [{"op": "range", "stop": 6}, {"op": "filter", "fn": "t_keeps_typo"}]})
    with pytest.raises(sluice.SpecError, match=r"ops\[1\] \(filter t_keeps_typo\), element 0: .* reads component "
                                                r"'vale'.*did you mean 'value'"):
        list(p)


def test_a_keyerror_of_the_functions_own_dict_stays_a_data_error():
    p = sluice.Pipeline(spec("t_own_dict", on_error="skip"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sluice.SkipWarning)
        assert list(p) == []
    assert p.stats()[1]["errors_skipped"] == 6
    with pytest.raises(sluice.Error) as e:
        list(sluice.Pipeline(spec("t_own_dict")))
    assert not isinstance(e.value, sluice.SpecError)


def test_a_component_declared_made_and_not_returned_ends_the_run():
    with pytest.raises(sluice.SpecError, match="declares it makes component 'twice' but returned none"):
        list(sluice.Pipeline(spec("t_forgets", on_error="skip")))


def test_the_element_is_a_dict_for_membership_and_copies():
    seen = []
    sluice.register_fn("t_look", lambda e: seen.append(dict(e)) or {**e, "has": np.int64("other" in e)})
    got = [int(e["has"]) for e in sluice.Pipeline(spec("t_look", stop=2))]
    assert got == [0, 0] and [sorted(s) for s in seen] == [["value"], ["value"]]


@pytest.mark.parametrize("kw,words", [
    ({"reads": "value"}, "reads must be a list or dict"),
    ({"reads": {"value": {"dtype": "float"}}}, "'float' is not one of uint8"),
    ({"makes": {"x": {"shape": [-3]}}}, "shape: expected a list"),
    ({"makes": {"x": {"rank": 1}}}, "expected {'dtype'"),
    ({"makes": ["x"]}, "makes must be a dict"),
    ({"makes": {"x": {}}, "filter": True}, "a filter makes no components"),
])
def test_bad_declarations_are_refused(kw, words):
    with pytest.raises((TypeError, ValueError), match=words):
        sluice.register_fn("t_bad_decl", double, **kw)
