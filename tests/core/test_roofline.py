import math

import numpy as np
import pytest

from perfkit.devices import KNOWN_DEVICES
from perfkit.roofline import (
    LAYER_NORM_FLOPS_PER_ELEMENT, Operation, arithmetic_intensity, attainable_flop_s, gemm_bytes, gemm_flops,
    gemm_operation, nvidia_example_operations, roofline_time,
)
from testkit import H100, V100


def test_gemm_flops_and_bytes():
    assert gemm_flops(2, 3, 4) == 48
    assert gemm_bytes(2, 3, 4, "float16") == 2 * (8 + 12 + 6)
    assert gemm_bytes(2, 3, 4, "tf32") == 4 * 26
    assert gemm_bytes(2, 3, 4, "int8") == 20 + 4 * 6  # int8 inputs, int32 output


@pytest.mark.parametrize("shape, expected", [
    ((8192, 128, 8192), 124.1),
    ((8192, 8192, 8192), 2730.7),
    ((4096, 512, 1024), 315.08),   # FC 4096 outputs × 1024 inputs, batch 512
    ((4096, 1, 1024), 0.9988),     # same, batch 1
])
def test_nvidia_worked_intensities(shape, expected):
    assert arithmetic_intensity(*shape, "float16") == pytest.approx(expected, abs=0.05 if expected > 10 else 1e-4)


def test_intensity_scales_with_itemsize():
    assert arithmetic_intensity(512, 512, 512, "float32") == pytest.approx(arithmetic_intensity(512, 512, 512, "fp16") / 2)


def test_8192x128x8192_is_memory_bound_on_v100_and_cube_is_math_bound():
    op = gemm_operation(8192, 128, 8192, "float16")
    assert op.intensity < V100.ops_per_byte("float16") == pytest.approx(138.9, abs=0.05)
    assert roofline_time(op.flops, op.bytes, V100, "float16")[1] == "memory"
    big = gemm_operation(8192, 8192, 8192, "float16")
    t, bound = roofline_time(big.flops, big.bytes, V100, "float16")
    assert bound == "math" and t == pytest.approx(2 * 8192**3 / 125e12)


def test_roofline_time_is_max_of_math_and_memory():
    t, bound = roofline_time(1e12, 1e9, H100, "float16")
    assert bound == "math" and t == pytest.approx(1e12 / 989.4e12)
    t, bound = roofline_time(1e9, 1e12, H100, "float16")
    assert bound == "memory" and t == pytest.approx(1e12 / 3350e9)
    assert roofline_time(0, 1e6, H100, "float16") == (pytest.approx(1e6 / 3350e9), "memory")


def test_attainable_flops_scalar_and_array():
    ridge = H100.ops_per_byte("float16")
    assert attainable_flop_s(1.0, H100, "float16") == pytest.approx(3350e9)
    assert attainable_flop_s(10 * ridge, H100, "float16") == pytest.approx(989.4e12)
    y = attainable_flop_s(np.array([0.5, ridge, 1e5]), H100, "float16")
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, [0.5 * 3350e9, 989.4e12, 989.4e12])


def test_nvidia_table_1():
    ops = {op.name: op for op in nvidia_example_operations()}
    assert list(ops) == ["Linear 4096×1024, batch 512", "Linear 4096×1024, batch 1", "ReLU",
                         "Max pool 3×3, stride 1", "Layer norm"]
    assert ops["Linear 4096×1024, batch 512"].intensity == pytest.approx(315.08, abs=0.01)
    assert ops["Linear 4096×1024, batch 1"].intensity == pytest.approx(1, abs=0.01)
    assert ops["ReLU"].intensity == 0.25
    assert ops["Max pool 3×3, stride 1"].intensity == 2.25
    assert ops["Layer norm"].intensity < 10
    assert ops["Layer norm"].intensity == LAYER_NORM_FLOPS_PER_ELEMENT / 4
    # Only the batch-512 linear layer is math-bound on V100 (NVIDIA's "usually limited by" column).
    bounds = {n: roofline_time(op.flops, op.bytes, V100, "float16")[1] for n, op in ops.items()}
    assert [n for n, b in bounds.items() if b == "math"] == ["Linear 4096×1024, batch 512"]
    relu32 = {op.name: op for op in nvidia_example_operations("float32")}["ReLU"]
    assert relu32.intensity == 0.125


def test_operation():
    op = Operation("x", 10, 4)
    assert op.intensity == 2.5
    with pytest.raises(ValueError, match="bytes"):
        Operation("x", 1, 0)
    with pytest.raises(ValueError, match="flops"):
        Operation("x", -1, 1)


@pytest.mark.parametrize("args, exc, match", [
    ((0, 1, 1), ValueError, "M must be a positive integer"),
    ((1, -3, 1), ValueError, "N must be a positive integer"),
    ((1, 1, 2.0), TypeError, "K must be a positive integer"),
    ((True, 1, 1), TypeError, "M must be"),
])
def test_bad_dimensions(args, exc, match):
    with pytest.raises(exc, match=match):
        arithmetic_intensity(*args, "float16")


def test_bad_dtype_and_missing_peak():
    with pytest.raises(ValueError, match="dtype 'float12' is not known"):
        gemm_bytes(1, 1, 1, "float12")
    with pytest.raises(LookupError, match="no peak for dtype 'float8'"):
        roofline_time(1, 1, KNOWN_DEVICES["A100-SXM4-40GB"], "float8")
    with pytest.raises(ValueError, match="intensity"):
        attainable_flop_s(0, H100, "float16")
    with pytest.raises(ValueError, match="bytes must be a non-negative"):
        roofline_time(1, -1, H100, "float16")
    assert math.isfinite(roofline_time(1, 1, H100, "float16")[0])
