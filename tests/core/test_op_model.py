"""perfkit.op_model: the kernels a memory-bound op runs, and the constants the H200 recordings give them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from perfkit.calibration import calibrated
from perfkit.devices import device_spec
from perfkit.memory_model import layer_bytes
from perfkit.op_model import OP_EVIDENCE, evidence_for, fit_hopper, op_time_s, pool_work, stats_rounds

from testkit import DATA, H100, V100

H200 = device_spec("H200")


def test_fitting_the_committed_recordings_gives_the_constants_the_module_states():
    """The Hopper numbers are what fit_hopper derives from batchnorm_sizes and pool_sizes (within rounding)."""
    spec = calibrated("H200")
    fitted = fit_hopper(pd.read_csv(DATA / "nvidia-h200" / "batchnorm_sizes.csv"),
                        pd.read_csv(DATA / "nvidia-h200" / "pool_sizes.csv"),
                        pd.read_csv(DATA / "nvidia-h200" / "activation_sizes.csv"),
                        spec.ceilings.bandwidth, spec.ceilings.kernel_latency_s)
    ev = OP_EVIDENCE["hopper"]
    assert fitted["dram_round_s"] == pytest.approx(ev.dram_round_s, rel=0.01)
    assert fitted["backward_dram_round_s"] == pytest.approx(ev.dram_round_s, rel=0.02)  # two kernels agree
    assert fitted["l2_round_s"] == pytest.approx(ev.l2_round_s, rel=0.01)
    assert fitted["extra_kernel_s"] == pytest.approx(ev.extra_kernel_s, rel=0.01)
    for pass_ in ("forward", "backward"):
        assert fitted[f"bn_nhwc {pass_}"] == pytest.approx(ev.bn_nhwc_s[pass_], rel=0.01)
    for (kind, pass_), per_element in ev.activation_s.items():
        if kind != "silu":  # assumed equal to the sigmoid's: not in the recording
            assert fitted[f"{kind} {pass_}"] == pytest.approx(per_element, rel=0.01)
    assert fitted["relu forward"] < fitted["gelu forward"] / 1.3  # ReLU streams; GELU computes
    for key, (fixed, per_window) in ev.pool_s.items():
        a, b = fitted[f"pool {key[0]} {key[1]}"]
        assert (a, b) == (pytest.approx(fixed, rel=0.01), pytest.approx(per_window, rel=0.01))


def test_nchw_batch_norm_is_bound_by_its_per_channel_blocks_not_by_bandwidth():
    """Same elements, 8× the channels: 8× the blocks sweeping in parallel, so far less time."""
    few = op_time_s("batchnorm", (256, 64, 56, 56), "bfloat16", H200)
    many = op_time_s("batchnorm", (32, 512, 56, 56), "bfloat16", H200)
    assert few > 5 * many
    streamed = layer_bytes("batchnorm", (256, 64, 56, 56), "bfloat16") / H200.ceilings.bandwidth
    assert few > 10 * streamed  # the byte model alone is an order of magnitude too fast here


def test_channels_last_batch_norm_is_faster_than_nchw_on_few_channels_and_grows_with_elements():
    nchw = op_time_s("batchnorm", (256, 64, 56, 56), "bfloat16", H200)
    nhwc = op_time_s("batchnorm", (256, 64, 56, 56), "bfloat16", H200, nhwc=True)
    assert nhwc < nchw / 2
    small = op_time_s("batchnorm", (64, 64, 56, 56), "bfloat16", H200, nhwc=True)
    assert 3 < nhwc / small < 4.1  # per-element arithmetic: ~4× the elements, ~4× the time


def test_backward_rereads_from_l2_when_the_channels_data_fits():
    fits = op_time_s("batchnorm", (16, 64, 56, 56), "bfloat16", H200, pass_="backward")
    forward = op_time_s("batchnorm", (16, 64, 56, 56), "bfloat16", H200)
    rounds = stats_rounds((16, 64, 56, 56))
    ev = OP_EVIDENCE["hopper"]
    assert fits == pytest.approx(5e-6 + rounds * (ev.dram_round_s + ev.l2_round_s), rel=0.05)  # default latency
    assert fits < 2 * forward


def test_stats_rounds_follow_pytorchs_block_shape():
    assert stats_rounds((256, 64, 56, 56)) == 256 * 7  # 512 threads along 3136: 7 rounds per image
    assert stats_rounds((32, 2048, 7, 7)) == 4  # 64 threads along 49, 8 images per round


def test_pooling_is_bound_by_its_elements_and_windows():
    n, windows = pool_work((64, 64, 112, 112), "max", "backward", 3, 2, 1)
    assert n == 64 * 64 * 112 * 112 and windows == pytest.approx(2.25)
    n, windows = pool_work((64, 64, 112, 112), "max", "forward", 3, 2, 1)
    assert n == 64 * 64 * 56 * 56 and windows == 9
    back = op_time_s("maxpool", (64, 64, 112, 112), "bfloat16", H200, pass_="backward", kernel_size=3, stride=2,
                     padding=1)
    nbytes = layer_bytes("maxpool", (64, 64, 112, 112), "bfloat16", pass_="backward", kernel_size=3, stride=2,
                         padding=1)
    assert back > 3 * nbytes / H200.ceilings.bandwidth


def test_a_gpu_of_another_family_gets_hoppers_evidence_labelled_and_scaled_by_its_sms():
    ev, label = evidence_for(V100)
    assert ev is OP_EVIDENCE["hopper"] and "assumed from hopper" in label and "volta" in label
    assert evidence_for(H100)[1] == OP_EVIDENCE["hopper"].source
    big = (64, 64, 112, 112)
    on_v100 = op_time_s("avgpool", big, "float16", V100, pass_="backward", kernel_size=2, stride=2)
    on_h100 = op_time_s("avgpool", big, "float16", H100, pass_="backward", kernel_size=2, stride=2)
    assert on_v100 / on_h100 == pytest.approx(132 / 80, rel=0.1)  # cycle-bound: fewer SMs, more time


def test_streaming_ops_keep_the_byte_model():
    spec = H100
    t = op_time_s("relu", (1 << 24,), "bfloat16", spec)
    nbytes = layer_bytes("relu", (1 << 24,), "bfloat16")
    assert t == pytest.approx(nbytes / spec.ceilings.bandwidth + 5e-6, rel=1e-6)
    assert op_time_s("add", (8, 8), "bfloat16", spec, pass_="backward") == 0.0  # no bytes, no kernel


def test_bad_input_is_refused_before_any_work():
    with pytest.raises(LookupError, match="unknown layer kind"):
        op_time_s("conv", (1, 2, 3, 4), "bfloat16", H100)
    with pytest.raises(ValueError, match="pass_"):
        op_time_s("relu", (4,), "bfloat16", H100, pass_="sideways")
    assert math.isfinite(op_time_s("batchnorm", (2, 3, 4, 4), "float32", H100, pass_="backward"))
