# test_layout.py: normalize's "layout": "CHW" gives channels-first images, so that batches arrive as contiguous NCHW
# float32 (PyTorch's order) with no permute and no copy after the engine; the planner's fusion keeps it.
import numpy as np
import pytest

import sluice

from conftest import image_spec


def chw_spec(data, layout):
    spec = image_spec(data, batch=4)
    for op in spec["ops"]:
        if op.get("fn") == "random_flip":
            op["args"]["prob"] = 0.0  # the same pixels for both layouts
        if op.get("fn") == "normalize":
            op["args"]["layout"] = layout
    return spec


def test_chw_batches_are_nchw_and_contiguous(data):
    hwc = [b["image"].copy() for b in sluice.Pipeline(chw_spec(data, "HWC"))]
    chw = [b["image"] for b in sluice.Pipeline(chw_spec(data, "CHW"))]
    assert len(hwc) == len(chw) == 3
    for a, b in zip(hwc, chw):
        assert a.shape == (4, 32, 32, 3) and b.shape == (4, 3, 32, 32)
        assert b.dtype == np.float32 and b.flags.c_contiguous
        np.testing.assert_array_equal(b, a.transpose(0, 3, 1, 2))


def test_chw_needs_an_image_and_a_known_layout(data):
    with pytest.raises(sluice.SpecError, match="layout"):
        sluice.Pipeline({"ops": [{"op": "range", "stop": 3},
                                 {"op": "map", "fn": "normalize", "args": {"component": "value", "layout": "CHW"}}]})
    with pytest.raises(sluice.SpecError, match="layout"):
        sluice.Pipeline(chw_spec(data, "NCHW"))


def test_chw_survives_the_planner(data):
    p = sluice.Pipeline(chw_spec(data, "CHW"), tune=True)  # fuses decode_jpeg with random_resized_crop when built
    shapes = {b["image"].shape for b in p}
    assert shapes == {(4, 3, 32, 32)}
