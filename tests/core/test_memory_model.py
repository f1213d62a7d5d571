"""The byte model of memory-limited layers, checked against NVIDIA's statements and by hand."""

from __future__ import annotations

import math

import pytest

import perfkit as pk
from perfkit.memory_model import KINDS, PARAM_ITEMSIZE

SHAPE = (32, 64, 56, 56)  # a ResNet-50 stage-1 activation
E = math.prod(SHAPE)


def test_nvidia_table1_intensities_follow_from_the_byte_model():
    # GPU Performance Background, Table 1: ReLU 0.25 FLOP/B, 3×3 stride-1 max pool 2.25 FLOP/B (fp16)
    relu = pk.layer_bytes("relu", SHAPE, "float16")
    assert E / relu == pytest.approx(0.25)
    pool = pk.layer_bytes("maxpool", SHAPE, "float16", kernel_size=3, stride=1, padding=1, indices_itemsize=0)
    assert 9 * E / pool == pytest.approx(2.25)
    ops = {op.name: op.intensity for op in pk.roofline.nvidia_example_operations("float16")}
    assert ops["ReLU"] == pytest.approx(0.25) and ops["Max pool 3×3, stride 1"] == pytest.approx(2.25)


@pytest.mark.parametrize("kind", ["relu", "sigmoid", "tanh", "gelu", "silu", "softmax"])
def test_activation_reads_and_writes_each_element(kind):
    s = 2
    assert pk.layer_bytes(kind, SHAPE, "bfloat16") == 2 * E * s  # read x, write y
    assert pk.layer_bytes(kind, SHAPE, "bfloat16", pass_="backward") == 3 * E * s  # y or x, dy → dx
    assert pk.layer_bytes(kind, SHAPE, "float32") == 2 * E * 4


def test_batchnorm_persistent_moves_fewer_bytes_than_two_pass():
    # NVIDIA: "persistent implementations of batch normalization require fewer loads from memory"
    s, C = 2, SHAPE[1]
    params_fwd, params_bwd = 8 * C * PARAM_ITEMSIZE, 5 * C * PARAM_ITEMSIZE
    assert pk.layer_bytes("batchnorm", SHAPE, "float16") == 2 * E * s + params_fwd
    assert pk.layer_bytes("batchnorm", SHAPE, "float16", persistent=False) == 3 * E * s + params_fwd
    assert pk.layer_bytes("batchnorm", SHAPE, "float16", pass_="backward") == 3 * E * s + params_bwd
    assert pk.layer_bytes("batchnorm", SHAPE, "float16", pass_="backward", persistent=False) == 5 * E * s + params_bwd
    assert pk.layer_bytes("batchnorm", SHAPE, "float16", training=False) == 2 * E * s + 4 * C * PARAM_ITEMSIZE
    # the per-channel parameters are negligible ("+ O(C)")
    assert params_fwd / (2 * E * s) < 1e-4


def test_layernorm_counts_rows_and_features():
    shape, s = (8, 1024, 768), 2
    rows, D = 8 * 1024, 768
    fwd = pk.layer_bytes("layernorm", shape, "float16")
    assert fwd == 2 * math.prod(shape) * s + 2 * D * 4 + 2 * rows * 4
    assert pk.layer_bytes("layernorm", shape, "float16", training=False, elementwise_affine=False) == \
        2 * math.prod(shape) * s
    bwd = pk.layer_bytes("layernorm", shape, "float16", pass_="backward")
    assert bwd == 3 * math.prod(shape) * s + 3 * D * 4 + 2 * rows * 4
    two_dims = pk.layer_bytes("layernorm", shape, "float16", normalized_ndim=2, training=False)
    assert two_dims == 2 * math.prod(shape) * s + 2 * 1024 * 768 * 4


def test_pooling_reads_input_writes_output():
    s = 2
    out = math.prod(pk.memory_model.pool_output_shape(SHAPE, 3, 2, 1))  # ResNet's 3×3/2 pool: 56 → 28
    assert pk.memory_model.pool_output_shape(SHAPE, 3, 2, 1) == (32, 64, 28, 28)
    # inference (no indices) vs training (PyTorch writes int64 argmax indices for the backward)
    assert pk.layer_bytes("maxpool", SHAPE, "float16", kernel_size=3, stride=2, padding=1,
                          indices_itemsize=0) == s * (E + out)
    assert pk.layer_bytes("maxpool", SHAPE, "float16", kernel_size=3, stride=2, padding=1) == s * (E + out) + 8 * out
    assert pk.layer_bytes("avgpool", SHAPE, "float16", kernel_size=2) == s * (E + E // 4)
    assert pk.layer_bytes("avgpool", SHAPE, "float16", pass_="backward", kernel_size=2) == s * (E // 4 + E)
    # max backward: dy, the saved int64 indices (PyTorch), dx; without indices: dy, x, y, dx
    bwd = pk.layer_bytes("maxpool", SHAPE, "float16", pass_="backward", kernel_size=3, stride=2, padding=1)
    assert bwd == s * out + 8 * out + s * E
    no_idx = pk.layer_bytes("maxpool", SHAPE, "float16", pass_="backward", kernel_size=3, stride=2,
                            padding=1, indices_itemsize=0)
    assert no_idx == s * (2 * out + 2 * E)


def test_elementwise_extras():
    shape, s, C = (4096, 3072), 2, 3072
    e = 4096 * 3072
    assert pk.layer_bytes("bias", shape, "float16", dim=-1) == 2 * e * s + C * s
    assert pk.layer_bytes("bias", shape, "float16", pass_="backward", dim=-1) == e * s + C * s
    assert pk.layer_bytes("add", shape, "float16") == 3 * e * s
    assert pk.layer_bytes("add", shape, "float16", pass_="backward") == 0
    assert pk.layer_bytes("dropout", shape, "float16") == 2 * e * s + e  # one bool mask byte per element
    assert pk.layer_bytes("dropout", shape, "float16", mask_itemsize=0) == 2 * e * s


def test_fusing_a_chain_saves_the_intermediate_round_trips():
    s = 2
    eager = pk.chain_bytes(["batchnorm", "relu"], SHAPE, "float16")
    fused = pk.chain_bytes(["batchnorm", "relu"], SHAPE, "float16", fused=True)
    assert eager == pk.layer_bytes("batchnorm", SHAPE, "float16") + pk.layer_bytes("relu", SHAPE, "float16")
    assert eager - fused == 2 * E * s  # BN's output written, then read again by ReLU
    tail = [("bias", {"dim": -1}), "gelu", "dropout"]
    shape = (8192, 3072)
    e = math.prod(shape)
    saved = pk.chain_bytes(tail, shape, "bfloat16") - pk.chain_bytes(tail, shape, "bfloat16", fused=True)
    assert saved == 2 * (2 * e * s)  # two intermediates, each written once and read once
    assert pk.chain_bytes(["relu"], shape, "bfloat16", fused=True) == pk.layer_bytes("relu", shape, "bfloat16")
    # a two-pass batch norm reads its input twice even when fused
    assert pk.chain_bytes([("batchnorm", {"persistent": False}), "relu"], SHAPE, "float16", fused=True) \
        == fused + E * s


def test_memory_time_is_latency_plus_bytes_over_bandwidth():
    h100 = pk.device_spec("H100-SXM")
    bw = pk.achievable_ceilings(h100).bandwidth
    assert pk.memory_time(0, h100, latency_s=0.0) == 0.0
    assert pk.memory_time(1e9, h100, latency_s=0.0) == pytest.approx(1e9 / bw)
    t = pk.predict_layer_time("relu", SHAPE, "float16", h100, latency_s=2e-6)
    assert t == pytest.approx(2e-6 + 4 * E / bw)
    # a tiny tensor is latency-bound, a large one bandwidth-bound
    assert pk.predict_layer_time("relu", (1024,), "float16", h100) < 1.01 * pk.memory_time(0, h100)
    big = pk.predict_layer_time("relu", (1 << 28,), "float16", h100)
    assert big > 50 * pk.memory_time(0, h100)


def test_bad_input_names_the_parameter():
    with pytest.raises(LookupError, match="unknown layer kind 'conv'"):
        pk.layer_bytes("conv", SHAPE, "float16")
    with pytest.raises(ValueError, match=r"shape\[1\]"):
        pk.layer_bytes("relu", (4, -3), "float16")
    with pytest.raises(TypeError, match="shape"):
        pk.layer_bytes("relu", 1024, "float16")
    with pytest.raises(ValueError, match="pass_"):
        pk.layer_bytes("relu", SHAPE, "float16", pass_="sideways")
    with pytest.raises(TypeError, match="kernel_size"):
        pk.layer_bytes("relu", SHAPE, "float16", kernel_size=3)
    with pytest.raises(TypeError, match="kernel_size"):
        pk.layer_bytes("maxpool", SHAPE, "float16")
    with pytest.raises(ValueError, match="larger than the padded input"):
        pk.layer_bytes("maxpool", (1, 1, 4, 4), "float16", kernel_size=7, padding=1)
    with pytest.raises(ValueError, match="at least 4 dimensions"):
        pk.layer_bytes("avgpool", (4, 4), "float16", kernel_size=2)
    with pytest.raises(ValueError, match="training=True"):
        pk.layer_bytes("batchnorm", SHAPE, "float16", pass_="backward", training=False)
    with pytest.raises(ValueError, match="dtype"):
        pk.layer_bytes("relu", SHAPE, "float17")
    with pytest.raises(ValueError, match="changes the tensor's shape"):
        pk.chain_bytes(["relu", ("maxpool", {"kernel_size": 2})], SHAPE, "float16")
    with pytest.raises(LookupError, match="unknown layer kind"):
        pk.chain_bytes(["relu", "softplus"], SHAPE, "float16")
    with pytest.raises(TypeError, match="kinds"):
        pk.chain_bytes("relu", SHAPE, "float16")
    with pytest.raises(ValueError, match="nbytes"):
        pk.memory_time(-1, pk.device_spec("H100-SXM"))


def test_every_kind_has_both_passes():
    for kind, defaults in KINDS.items():
        params = {"kernel_size": 2} if "kernel_size" in defaults else {}
        params.update({"num_embeddings": 100} if kind == "embedding" else {})
        for pass_ in pk.memory_model.PASSES:
            assert pk.layer_bytes(kind, SHAPE, "float16", pass_=pass_, **params) >= 0


def test_elementwise_and_embedding_bytes():
    E, s = 32 * 64 * 56 * 56, 2
    # a unary elementwise op moves what an activation does; mul of two tensors reads both
    for pass_ in ("forward", "backward"):
        assert pk.layer_bytes("elementwise", SHAPE, "float16", pass_=pass_) == pk.layer_bytes(
            "gelu", SHAPE, "float16", pass_=pass_)
    assert pk.layer_bytes("elementwise", SHAPE, "float16", read_elements=2 * E) == 3 * E * s
    assert pk.layer_bytes("elementwise", SHAPE, "float16", pass_="backward", read_elements=2 * E) == 5 * E * s
    # a reduction to one value per row: the input read, the small output written
    assert pk.layer_bytes("elementwise", (64, 1), "float32", read_elements=64 * 768) == (64 * 768 + 64) * 4
    # embedding: rows read and written, int64 indices read; backward writes the whole table
    out = (8, 1024, 768)
    rows = 8 * 1024
    assert pk.layer_bytes("embedding", out, "bfloat16", num_embeddings=50257) == 2 * rows * 768 * 2 + rows * 8
    assert pk.layer_bytes("embedding", out, "bfloat16", pass_="backward", num_embeddings=50257) == (
        rows * 768 * 2 + rows * 8 + 50257 * 768 * 2)
    with pytest.raises(TypeError, match="num_embeddings"):
        pk.layer_bytes("embedding", out, "bfloat16")
    with pytest.raises(ValueError, match="read_elements"):
        pk.layer_bytes("elementwise", out, "bfloat16", read_elements=-1)


def test_fused_chain_reads_second_operands_once():
    E, s = 32 * 64 * 56 * 56, 2
    mul = ("elementwise", {"read_elements": 2 * E})
    assert pk.chain_bytes(["gelu", mul], SHAPE, "float16", fused=True) == 3 * E * s
    assert pk.chain_bytes(["gelu", mul], SHAPE, "float16") == 2 * E * s + 3 * E * s
