"""perfkit.kernels.cupy_rnn: the plan's arithmetic and refusals, the torch oracle, the kernel.

CPU tests check the pure plan, the oracle against ``torch.nn.RNN`` and every refusal; a
compile test builds the CUDA source with NVRTC when NVIDIA's wheels are installed; the
``gpu`` tests run the kernel itself against the oracle.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import pytest
import torch

from perfkit.kernels import (PersistentPlan, max_persistent_hidden, persistent_rnn, persistent_rnn_plan,
                             rnn_reference)
from testkit import SCRIPTS

HAS_CUDA = torch.cuda.is_available()
HAS_CUPY = importlib.util.find_spec("cupy") is not None
H100_SM_LIMITS = dict(sms=132, smem_per_block_bytes=227 * 1024)  # opt-in shared memory per block
A100_SM_LIMITS = dict(sms=108, smem_per_block_bytes=163 * 1024)
T4_SM_LIMITS = dict(sms=40, smem_per_block_bytes=64 * 1024)
SCRIPT = SCRIPTS / "check_cuda_source.py"
pytestmark = pytest.mark.filterwarnings("ignore::perfkit.timing.NoiseWarning")


# ------------------------------------------------------------------------------------ the plan

def test_plan_arithmetic_on_an_h100():
    p = persistent_rnn_plan(2048, 8, **H100_SM_LIMITS)
    assert isinstance(p, PersistentPlan)
    assert p.rows_per_block == 16 and p.blocks == 128  # ceil(2048 / 132) rows, ceil(2048 / 16) blocks
    assert p.weight_bytes == 2048 * 2048 * 2 == 8_388_608
    assert p.block_weight_bytes == 16 * 2048 * 2
    assert p.batch_chunk == 8 and p.batch_tile == 8 and p.staging_bytes == 8 * 2048 * 2
    assert p.smem_bytes == p.block_weight_bytes + p.staging_bytes == 98_304
    assert p.threads == 256 and p.flops_per_step == 2 * 2048**2 * 8


def test_plan_stages_h_in_chunks_when_the_batch_does_not_fit():
    p = persistent_rnn_plan(2048, 64, **H100_SM_LIMITS)
    assert p.batch_chunk == (232_448 - 16 * 2048 * 2) // (2048 * 2) == 40
    assert p.smem_bytes <= H100_SM_LIMITS["smem_per_block_bytes"]
    p = persistent_rnn_plan(3824, 64, **H100_SM_LIMITS)  # the largest: one staged row beside 29 rows of U
    assert (p.rows_per_block, p.batch_chunk, p.blocks) == (29, 1, 132)


@pytest.mark.parametrize("batch, tile", [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (64, 8)])
def test_batch_tile_is_the_next_power_of_two_up_to_8(batch, tile):
    assert persistent_rnn_plan(512, batch, **H100_SM_LIMITS).batch_tile == tile


def test_small_hidden_uses_fewer_blocks_than_sms():
    p = persistent_rnn_plan(64, 1, **H100_SM_LIMITS)
    assert p.rows_per_block == 1 and p.blocks == 64
    p = persistent_rnn_plan(1304, 4, **H100_SM_LIMITS)  # 131 blocks of 10 rows, the last with 4
    assert p.blocks == 131 and 1304 - (p.blocks - 1) * p.rows_per_block == 4


def test_refuses_hidden_not_a_multiple_of_8():
    with pytest.raises(ValueError, match=r"hidden must be a multiple of 8 .*16-byte.* got 1001; pad it to 1008"):
        persistent_rnn_plan(1001, 4, **H100_SM_LIMITS)


def test_refuses_weights_larger_than_all_shared_memory():
    msg = r"fp16 recurrent weights do not fit on chip: hidden² · 2 = 33,554,432 bytes > .*132 × 232,448 = 30,683,136"
    with pytest.raises(ValueError, match=msg) as e:
        persistent_rnn_plan(4096, 4, **H100_SM_LIMITS)
    assert "largest hidden that fits here is 3824" in str(e.value)


def test_refuses_a_block_share_larger_than_smem_per_block():
    # 3832² · 2 fits in 132 × 227 KiB, but 30 rows of U plus one row of h do not fit in one block
    assert 3832**2 * 2 <= 132 * 232_448
    with pytest.raises(ValueError, match=r"rows_per_block = ceil\(3832 / 132\) = 30 rows .*= 237,584 bytes"):
        persistent_rnn_plan(3832, 1, **H100_SM_LIMITS)


@pytest.mark.parametrize("kwargs, exc, name", [
    (dict(hidden=0, batch=1), ValueError, "hidden"),
    (dict(hidden=512.0, batch=1), TypeError, "hidden"),
    (dict(hidden=512, batch=0), ValueError, "batch"),
    (dict(hidden=512, batch=1, threads=100), ValueError, "threads must be a multiple of 32"),
    (dict(hidden=512, batch=1, threads=2048), ValueError, "threads"),
    (dict(hidden=512, batch=1, sms=0), ValueError, "sms"),
    (dict(hidden=512, batch=1, smem_per_block_bytes=-1), ValueError, "smem_per_block_bytes"),
])
def test_plan_arguments_are_checked(kwargs, exc, name):
    args = {**H100_SM_LIMITS, **kwargs}
    with pytest.raises(exc, match=name):
        persistent_rnn_plan(args.pop("hidden"), args.pop("batch"), **args)


@pytest.mark.parametrize("device, expected", [(H100_SM_LIMITS, 3824), (A100_SM_LIMITS, 2912), (T4_SM_LIMITS, 1120)])
def test_max_persistent_hidden(device, expected):
    h = max_persistent_hidden(**device)
    assert h == expected and h % 8 == 0
    persistent_rnn_plan(h, 1, **device)  # accepted
    with pytest.raises(ValueError, match="largest hidden that fits here is"):
        persistent_rnn_plan(h + 8, 1, **device)
    assert h <= math.isqrt(device["sms"] * device["smem_per_block_bytes"] // 2)  # the weights bound
    assert max_persistent_hidden(**device, batch=64) == h  # h is staged in chunks


def test_max_persistent_hidden_tiny_device_and_arguments():
    assert max_persistent_hidden(sms=1, smem_per_block_bytes=16) == 0
    with pytest.raises(ValueError, match="sms"):
        max_persistent_hidden(sms=0, smem_per_block_bytes=1024)
    with pytest.raises(ValueError, match="batch"):
        max_persistent_hidden(sms=1, smem_per_block_bytes=1024, batch=0)


# ------------------------------------------------------------------------------------ the oracle

def _rnn_case(nonlinearity, T=6, B=3, I=5, H=16, seed=0):
    torch.manual_seed(seed)
    rnn = torch.nn.RNN(I, H, nonlinearity=nonlinearity)
    x, h0 = torch.randn(T, B, I), torch.randn(1, B, H)
    with torch.no_grad():
        x_proj = x @ rnn.weight_ih_l0.T + rnn.bias_ih_l0 + rnn.bias_hh_l0
        expected, h_last = rnn(x, h0)
    return rnn, x, h0, x_proj, expected, h_last


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_reference_equals_torch_rnn(activation):
    rnn, x, h0, x_proj, expected, h_last = _rnn_case(activation)
    out = rnn_reference(x_proj, rnn.weight_hh_l0, h0[0], activation=activation)
    assert out.shape == expected.shape and out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[-1], h_last[0], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        zero_start, _ = rnn(x)
    torch.testing.assert_close(rnn_reference(x_proj, rnn.weight_hh_l0, activation=activation), zero_start,
                               rtol=1e-5, atol=1e-5)


def test_reference_rounds_h_to_the_input_dtype_after_each_step():
    _, _, h0, x_proj, _, _ = _rnn_case("tanh")
    w = torch.randn(16, 16) / 4
    out = rnn_reference(x_proj.half(), w.half(), h0[0].half())
    assert out.dtype == torch.float16
    h = h0[0].half().float()
    for t in range(x_proj.shape[0]):  # the same steps, written out
        h = torch.tanh(x_proj[t].half().float() + h @ w.half().float().T).half()
        assert torch.equal(out[t], h)
        h = h.float()


def _fp16(*shape):
    return torch.zeros(*shape, dtype=torch.float16)


@pytest.mark.parametrize("fn", [rnn_reference, persistent_rnn], ids=lambda f: f.__name__)
@pytest.mark.parametrize("args, kwargs, exc, match", [
    (([[1.0]], _fp16(4, 4)), {}, TypeError, "x_proj must be a torch.Tensor"),
    ((_fp16(2, 3, 4), "w"), {}, TypeError, "weight must be a torch.Tensor"),
    ((_fp16(2, 3, 4), _fp16(4, 4), 0), {}, TypeError, "h0 must be a torch.Tensor"),
    ((_fp16(3, 4), _fp16(4, 4)), {}, ValueError, r"x_proj must be a \(T, B, H\)"),
    ((_fp16(0, 3, 4), _fp16(4, 4)), {}, ValueError, "T, B, H ≥ 1"),
    ((_fp16(2, 3, 4), _fp16(4, 5)), {}, ValueError, r"weight must be \(H, H\) = \(4, 4\)"),
    ((_fp16(2, 3, 4), _fp16(4, 4), _fp16(2, 4)), {}, ValueError, r"h0 must be \(B, H\) = \(3, 4\)"),
    ((_fp16(2, 3, 4), torch.zeros(4, 4, dtype=torch.int32)), {}, ValueError, "weight must be"),
    ((_fp16(2, 3, 4), torch.zeros(4, 4, dtype=torch.float16, device="meta")), {}, ValueError, "one device"),
    ((_fp16(2, 3, 4), _fp16(4, 4)), {"activation": "sigmoid"}, ValueError, "activation must be one of"),
])
def test_bad_inputs_are_named(fn, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_kernel_needs_float16():
    with pytest.raises(ValueError, match=r"x_proj must be float16 .*\.half\(\)"):
        persistent_rnn(torch.zeros(2, 3, 8), torch.zeros(8, 8))
    with pytest.raises(ValueError, match="h0 must be float16"):
        persistent_rnn(_fp16(2, 3, 8), _fp16(8, 8), torch.zeros(3, 8))


@pytest.mark.skipif(HAS_CUPY and HAS_CUDA, reason="CuPy and a GPU are present")
def test_kernel_without_cupy_or_gpu_is_a_clear_runtime_error():
    with pytest.raises(RuntimeError, match="persistent RNN kernel needs CuPy and an NVIDIA GPU"):
        persistent_rnn(_fp16(2, 3, 8), _fp16(8, 8))


# ------------------------------------------------------------------------------------ NVRTC

def _check_script():
    spec = importlib.util.spec_from_file_location("check_cuda_source", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_cuda_source", module)
    spec.loader.exec_module(module)
    return module


def test_cuda_sources_compile_with_nvrtc():
    script = _check_script()
    nvrtc = script.find_nvrtc()
    if nvrtc is None:
        pytest.skip("NVRTC not installed (pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl)")
    lines = script.check(nvrtc, ("90", "75"), quick=True)
    assert len(lines) == 6 and all(line.startswith("ok") for line in lines)
    assert any(re.search(r"sm_75 +persistent_rnn batch_tile=8", line) for line in lines)


# ------------------------------------------------------------------------------------ GPU

def _inputs(T, B, H, *, h0=True, scale=1.0, seed=0, device="cuda"):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, H, generator=g).half()
    w = (torch.randn(H, H, generator=g) * scale / math.sqrt(H)).half()
    h = torch.randn(B, H, generator=g).half() if h0 else None
    return [t.to(device) if t is not None else None for t in (x, w, h)]


def _expect_close(out, x, w, h, activation):
    ref = rnn_reference(x.cpu(), w.cpu(), None if h is None else h.cpu(), activation=activation)
    assert out.shape == ref.shape and out.dtype == torch.float16 and out.is_cuda
    torch.testing.assert_close(out.float().cpu(), ref.float(), rtol=1e-2, atol=1e-2)  # fp16 storage


@pytest.fixture
def gpu():
    pytest.importorskip("cupy")
    from perfkit.kernels.cupy_rnn import _cupy, _device_limits

    _cupy()
    sms, smem, _ = _device_limits(torch.cuda.current_device())
    return dict(sms=sms, smem_per_block_bytes=smem)


@pytest.mark.gpu
@pytest.mark.parametrize("T, B, H, activation, h0", [
    (5, 1, 64, "tanh", False), (7, 3, 256, "relu", True), (4, 5, 520, "tanh", True),
    (6, 8, 1024, "relu", False), (3, 13, 1304, "tanh", True), (3, 33, 256, "relu", True),
    (20, 4, 2048, "tanh", True), (2, 64, 2048, "tanh", False),
], ids=str)
def test_kernel_matches_reference(gpu, T, B, H, activation, h0):
    x, w, h = _inputs(T, B, H, h0=h0, scale=0.5 if activation == "relu" else 1.0)
    _expect_close(persistent_rnn(x, w, h, activation=activation), x, w, h, activation)


@pytest.mark.gpu
def test_kernel_at_the_largest_hidden_this_gpu_accepts(gpu):
    H = max_persistent_hidden(**gpu)
    assert H >= 512
    for B in (1, 3):
        x, w, h = _inputs(2, B, H, h0=B > 1)
        _expect_close(persistent_rnn(x, w, h), x, w, h, "tanh")


@pytest.mark.gpu
def test_refuses_a_too_large_hidden_before_launching(gpu):
    H = max_persistent_hidden(**gpu) + 8
    x, w, _ = _inputs(1, 1, H, h0=False)
    with pytest.raises(ValueError, match="largest hidden that fits here is"):
        persistent_rnn(x, w)
    torch.cuda.synchronize()  # no CUDA error is pending
    x, w, h = _inputs(2, 2, 256)
    _expect_close(persistent_rnn(x, w, h), x, w, h, "tanh")


@pytest.mark.gpu
def test_runs_on_torchs_current_non_default_stream(gpu):
    x_real, w, h = _inputs(4, 3, 512)
    x = torch.zeros_like(x_real)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # keeps the stream busy: a kernel elsewhere would see zeros
        x.copy_(x_real)
        out = persistent_rnn(x, w, h)
    stream.synchronize()
    _expect_close(out, x_real, w, h, "tanh")
