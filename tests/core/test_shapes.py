import pytest

from perfkit.shapes import RNN_GATES, conv_gemms, conv_output_size, linear_gemms, rnn_gemms


def test_linear_gemms_nvidia_mapping():
    g = linear_gemms(batch=512, in_features=1024, out_features=4096)
    assert g == {"forward": (4096, 512, 1024), "dgrad": (1024, 512, 4096), "wgrad": (1024, 4096, 512)}
    assert all(isinstance(x, int) for mnk in g.values() for x in mnk)


def test_conv_output_size():
    assert conv_output_size(224, 224, 7, 7, stride=2, padding=3) == (112, 112)
    assert conv_output_size(56, 56, 3, 3, padding=1) == (56, 56)
    assert conv_output_size(56, 56, 1, 1) == (56, 56)
    assert conv_output_size(10, 20, 3, 3, stride=(1, 2), padding=(0, 1)) == (8, 10)
    assert conv_output_size(32, 32, 3, 3, dilation=2) == (28, 28)  # effective 5×5
    assert conv_output_size(700, 161, 20, 5, stride=2) == (341, 79)  # DeepBench speech layer


def test_conv_output_empty_is_explained():
    with pytest.raises(ValueError, match=r"output would be empty.*R=7.*padded input"):
        conv_output_size(5, 5, 7, 3)
    with pytest.raises(ValueError, match=r"output would be empty.*S=3, dilation 4"):
        conv_output_size(9, 8, 1, 3, dilation=(1, 4))


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(stride=0), ValueError, "stride must be a positive integer"),
    (dict(stride=(1, 0)), ValueError, r"stride\[1\] must be a positive integer"),
    (dict(padding=-1), ValueError, "padding must be a non-negative integer"),
    (dict(dilation=1.5), TypeError, "dilation must be a positive integer"),
    (dict(stride=(1, 2, 3)), ValueError, "stride must be an integer or an"),
])
def test_conv_bad_params(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        conv_output_size(8, 8, 3, 3, **kwargs)


def test_conv_gemms_resnet_3x3():
    g = conv_gemms(N=32, C=64, H=56, W=56, K=128, R=3, S=3, stride=2, padding=1)
    P = Q = 28
    assert g == {
        "forward": (32 * P * Q, 128, 64 * 9),
        "dgrad": (32 * 56 * 56, 64, 128 * 9),
        "wgrad": (64 * 9, 128, 32 * P * Q),
    }
    with pytest.raises(ValueError, match="C must be a positive integer"):
        conv_gemms(1, 0, 8, 8, 8, 3, 3)


@pytest.mark.parametrize("cell, gates", [("rnn", 1), ("gru", 3), ("lstm", 4), ("LSTM", 4)])
def test_rnn_gemms(cell, gates):
    g = rnn_gemms(cell, hidden=1024, input_size=512, batch=64, seq_len=25)
    assert g == {"input": (gates * 1024, 64 * 25, 512), "recurrent": (gates * 1024, 64, 1024)}


def test_rnn_gates_and_bad_cell():
    assert RNN_GATES == {"rnn": 1, "gru": 3, "lstm": 4}
    with pytest.raises(ValueError, match="cell must be one of 'rnn', 'gru', 'lstm'"):
        rnn_gemms("transformer", 1, 1, 1, 1)
    with pytest.raises(ValueError, match="seq_len must be a positive integer"):
        rnn_gemms("gru", 8, 8, 8, 0)
