import pytest

from perfkit.quantization import (
    TileQuantization, WaveQuantization, alignment, is_aligned, pad_to_multiple, tile_quantization, wave_quantization,
)


@pytest.mark.parametrize("dtype, n", [
    ("float16", 8), ("bfloat16", 8), ("float32", 4), ("tf32", 4), ("float64", 2), ("int8", 16), ("float8", 16),
])
def test_alignment(dtype, n):
    assert alignment(dtype) == n


def test_alignment_a100_128_bytes_and_is_aligned():
    assert alignment("float16", bytes=128) == 64
    assert is_aligned("float16", 4096, 1024, 512)
    assert not is_aligned("float16", 4096, 1025)
    with pytest.raises(ValueError, match="bytes must be a multiple"):
        alignment("float64", bytes=4)
    with pytest.raises(ValueError, match="dtype 'int3' is not known"):
        alignment("int3")


def test_pad_to_multiple():
    assert pad_to_multiple(33708, 8) == 33712
    assert pad_to_multiple(64, 8) == 64
    assert pad_to_multiple(1, 64) == 64
    assert pad_to_multiple(0, 8) == 0
    with pytest.raises(ValueError, match="multiple must be a positive integer"):
        pad_to_multiple(5, 0)
    with pytest.raises(TypeError, match="n must be a non-negative integer"):
        pad_to_multiple(5.5, 8)


def test_tile_quantization_nvidia_example():
    tq = tile_quantization(257, 256, tile=(128, 128))
    assert isinstance(tq, TileQuantization)
    assert (tq.tiles_m, tq.tiles_n, tq.tiles) == (3, 2, 6)
    assert tq.efficiency == pytest.approx(0.669, abs=5e-4)
    assert tile_quantization(256, 256, (128, 128)).tiles == 4
    assert tile_quantization(256, 256, (128, 128)).efficiency == 1.0
    # tile=(TM, TN): TM rows of M, TN columns of N.
    assert (tile_quantization(512, 128, (256, 64)).tiles_m, tile_quantization(512, 128, (256, 64)).tiles_n) == (2, 2)
    with pytest.raises(AttributeError):
        tq.tiles = 7  # frozen


@pytest.mark.parametrize("N, tiles, waves, util", [
    (1536, 108, 1, 1.0), (1537, 117, 2, 0.5417), (1665, 126, 2, 0.5833), (3072, 216, 2, 1.0), (3073, 225, 3, 0.6944),
])
def test_wave_quantization_a100_example(N, tiles, waves, util):
    wq = wave_quantization(2304, N, (256, 128), sms=108)
    assert isinstance(wq, WaveQuantization)
    assert (wq.tiles, wq.waves, wq.wave_size) == (tiles, waves, 108)
    assert wq.utilization == pytest.approx(util, abs=1e-4)
    assert wq.last_wave_tiles == tiles - (waves - 1) * 108


def test_wave_quantization_figure_3_and_blocks_per_sm():
    # NVIDIA GPU background, Fig. 3: 12 blocks on an 8-SM GPU: 2 waves, the second half full.
    wq = wave_quantization(12, 1, (1, 1), sms=8)
    assert (wq.waves, wq.last_wave_tiles, wq.utilization) == (2, 4, 0.75)
    wq2 = wave_quantization(2304, 3072, (256, 128), sms=108, blocks_per_sm=2)
    assert (wq2.wave_size, wq2.waves, wq2.utilization) == (216, 1, 1.0)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(M=0, N=1, tile=(1, 1), sms=1), ValueError, "M must be a positive integer"),
    (dict(M=1, N=1, tile=(128,), sms=1), TypeError, "tile must be a pair"),
    (dict(M=1, N=1, tile=(128, 0), sms=1), ValueError, r"tile\[1\] must be a positive integer"),
    (dict(M=1, N=1, tile=(1, 1), sms=0), ValueError, "sms must be a positive integer"),
    (dict(M=1, N=1, tile=(1, 1), sms=1, blocks_per_sm=1.5), TypeError, "blocks_per_sm must be a positive integer"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        wave_quantization(**kwargs)


# ------------------------------------------------------------------------------------ properties

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from perfkit.quantization import cdiv  # noqa: E402

sizes = st.integers(1, 100_000)
tile_sides = st.sampled_from([1, 8, 16, 32, 64, 128, 256, 3, 100])


@given(st.integers(0, 10**30), st.integers(1, 10**12))
def test_cdiv_is_exact_ceiling_division(a, b):
    q = cdiv(a, b)
    assert q * b >= a > (q - 1) * b or (a == 0 and q == 0)


@given(st.integers(0, 10**9), st.integers(1, 4096))
def test_pad_to_multiple_is_the_next_multiple(n, multiple):
    p = pad_to_multiple(n, multiple)
    assert p % multiple == 0 and n <= p < n + multiple


@settings(max_examples=300)
@given(sizes, sizes, tile_sides, tile_sides, st.integers(1, 200), st.integers(1, 4))
def test_tiles_and_waves_cover_the_output_exactly(M, N, tm, tn, sms, blocks_per_sm):
    tq = tile_quantization(M, N, (tm, tn))
    # Just enough tiles along each side: one fewer would leave rows or columns uncovered.
    assert tq.tiles_m * tm >= M > (tq.tiles_m - 1) * tm
    assert tq.tiles_n * tn >= N > (tq.tiles_n - 1) * tn
    assert tq.tiles == tq.tiles_m * tq.tiles_n and 0 < tq.efficiency <= 1
    wq = wave_quantization(M, N, (tm, tn), sms, blocks_per_sm)
    assert wq.tiles == tq.tiles and wq.wave_size == sms * blocks_per_sm
    assert wq.waves * wq.wave_size >= wq.tiles > (wq.waves - 1) * wq.wave_size
    assert 1 <= wq.last_wave_tiles <= wq.wave_size
    assert (wq.waves - 1) * wq.wave_size + wq.last_wave_tiles == wq.tiles
    assert 0 < wq.utilization <= 1 and (wq.utilization == 1) == (wq.tiles % wq.wave_size == 0)


@given(sizes, sizes, tile_sides, tile_sides)
def test_whole_tiles_are_fully_efficient(M, N, tm, tn):
    assert (tile_quantization(M, N, (tm, tn)).efficiency == 1) == (M % tm == 0 and N % tn == 0)


@given(st.sampled_from(["float64", "float32", "tf32", "float16", "bfloat16", "float8", "int8"]),
       st.lists(st.integers(1, 10**6), min_size=1, max_size=4))
def test_is_aligned_means_multiples_of_16_bytes(dtype, dims):
    from perfkit.dtypes import itemsize

    assert is_aligned(dtype, *dims) == all(d * itemsize(dtype) % 16 == 0 for d in dims)
