"""perfkit.conv_model and the advisor's convolution rows: transposes, padded channels, per-image GEMMs."""

from __future__ import annotations

import pandas as pd
import pytest

from perfkit import calibrated
from perfkit.advisor.ops import Op
from perfkit.advisor.price import Pricer
from perfkit.conv_model import (CONV_EVIDENCE, conv_evidence, conv_gemm, direct_nchw, fit_hopper, kernel_channels,
                                narrow_channels, nchw_transposes, pad_channels_copy)
from testkit import DATA, H100, V100


def _conv(N=32, C=64, H=56, K=64, R=3, stride=1, padding=1, nhwc=False, **kw) -> dict:
    P = (H + 2 * padding - R) // stride + 1
    return dict(N=N, C=C, H=H, W=H, K=K, R=R, S=R, P=P, Q=P, groups=1, nhwc=nhwc, dims=2, stride=stride,
                padding=padding, dilation=1, input_grad=True, weight_grad=True, **kw)


def _rows(p: dict, spec=H100, dtype="bfloat16") -> pd.DataFrame:
    return pd.DataFrame(Pricer(dtype, spec, True).rows(Op(0, "c", "Conv2d", "conv", p)))


def test_channels_a_kernel_runs():
    assert [kernel_channels(c, "bfloat16") for c in (1, 3, 4, 8, 57)] == [4, 4, 4, 8, 57]
    assert kernel_channels(3, "tf32") == 3  # 4-byte types: three channels are already 12 bytes
    assert narrow_channels(3, "float16") and narrow_channels(8, "float16") and not narrow_channels(16, "float16")
    assert narrow_channels(57, "float16") and not narrow_channels(64, "float16")  # 114 bytes: not whole vectors
    assert direct_nchw(_conv(R=1, padding=0)) and not direct_nchw(_conv(R=1, padding=0, stride=2))
    assert not direct_nchw(_conv())


def test_gemms_and_copies_by_hand():
    stem = _conv(C=3, H=224, R=7, stride=2, padding=3)  # ResNet's: P = 112
    assert conv_gemm(stem, "forward", "bfloat16") == (32 * 112 * 112, 64, 200, 1)  # 4·49 = 196 → whole vectors
    assert conv_gemm(stem, "wgrad", "bfloat16") == (200, 64, 32 * 112 * 112, 1)
    x = 2 * 32 * 3 * 224 * 224
    assert pad_channels_copy(stem, "forward", "bfloat16") == x + x * 4 // 3
    assert pad_channels_copy(stem, "dgrad", "bfloat16") == 0 and pad_channels_copy(_conv(), "forward", "bf16") == 0
    one = _conv(R=1, padding=0, C=256)
    assert conv_gemm(one, "forward", "bfloat16", direct=True) == (56 * 56, 64, 256, 32)  # per image
    t = dict(nchw_transposes(_conv(K=128), "dgrad", "bfloat16"))
    assert t == {"dy": 2 * 2 * 32 * 128 * 56 * 56, "w": 2 * 2 * 128 * 64 * 9, "dx": 2 * 2 * 32 * 64 * 56 * 56}


def test_nchw_pays_three_transposes_per_pass_and_nhwc_none():
    nchw, nhwc = _rows(_conv()), _rows(_conv(nhwc=True))
    copies = nchw[nchw["op"] == "conv.nchw_transpose"]
    assert copies["pass"].tolist() == ["forward"] * 3 + ["dgrad"] * 3 + ["wgrad"] * 3
    assert not (nhwc["op"] == "conv.nchw_transpose").any()
    gemms = lambda f: f[f["op"] == "conv"]["predicted_s"].to_numpy()  # noqa: E731
    assert (gemms(nchw) == gemms(nhwc)).all()  # the same NHWC kernels run after the transposes
    ev = CONV_EVIDENCE["hopper"]
    lat = H100.ceilings.kernel_latency_s or 5e-6
    x = 2 * 32 * 64 * 56 * 56
    assert copies["predicted_s"].iloc[0] == pytest.approx(lat + 2 * x / (ev.transpose_fraction * 3350e9 * 0.9))
    # conv_layout (H200): a 3×3 64 → 64 layer on 56² images ran 2.0× slower in NCHW; the model says so
    h200 = calibrated("H200")
    fwd = [(lambda f: f.loc[f["pass"] == "forward", "predicted_s"].sum())(_rows(_conv(nhwc=n), h200, "float16"))
           for n in (False, True)]
    assert 1.7 < fwd[0] / fwd[1] < 2.3


def test_a_1x1_nchw_conv_takes_the_faster_of_per_image_gemms_and_transposes():
    big = _rows(_conv(R=1, padding=0, C=256))  # 56²: per-image GEMMs fill their tiles, no transposes
    assert not (big["op"] == "conv.nchw_transpose").any() and (big[big["op"] == "conv"]["batch"] == 1).all()
    assert set(big["K"]) >= {256}  # the table shows the pass's GEMM, not the per-image one
    small = _rows(_conv(N=16, R=1, padding=0, C=512, K=2048, H=7))  # 7²: 49 pixels a tile of 64 or 128
    assert (small["op"] == "conv.nchw_transpose").any()


def test_the_stem_pads_its_three_channels():
    nhwc = _rows(_conv(C=3, H=224, R=7, stride=2, padding=3, nhwc=True, reads_input=True) | {"input_grad": False})
    assert nhwc["op"].tolist() == ["conv", "conv.pad_channels", "conv", "conv.pad_channels"]
    assert nhwc["pass"].tolist() == ["forward", "forward", "wgrad", "wgrad"]
    assert nhwc.iloc[0]["K"] == 147 and nhwc.iloc[0]["flops"] == 2 * 32 * 112 * 112 * 64 * 147  # useful FLOPs
    ev = CONV_EVIDENCE["hopper"]
    x = 2 * 32 * 3 * 224 * 224
    assert nhwc.iloc[1]["predicted_s"] == pytest.approx((H100.ceilings.kernel_latency_s or 5e-6)
                                                         + (x + x * 4 // 3) / (ev.narrow_copy_fraction * 3350e9 * 0.9))


def test_other_families_say_what_they_assume():
    ev, label = conv_evidence(V100)
    assert ev is CONV_EVIDENCE["hopper"] and label.startswith("assumed from hopper") and "volta" in label
    assert conv_evidence(H100)[1] == CONV_EVIDENCE["hopper"].source


def test_hopper_fractions_are_what_the_h200_recordings_give():
    spec = calibrated("H200")
    fitted = fit_hopper(pd.read_csv(DATA / "nvidia-h200" / "conv_layout.csv"),
                        pd.read_csv(DATA / "nvidia-h200" / "conv_first_layer.csv"),
                        spec.ceilings.bandwidth, spec.ceilings.kernel_latency_s)
    ev = CONV_EVIDENCE["hopper"]
    assert fitted["transpose_fraction"] == pytest.approx(ev.transpose_fraction, abs=0.005)
    assert fitted["narrow_copy_fraction"] == pytest.approx(ev.narrow_copy_fraction, abs=0.005)
