"""Figures of experiment results: each names its source, and none is drawn without data."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from perfkit import plots  # noqa: E402
from perfkit.experiments import gemm  # noqa: E402

SOURCE = "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"


def _quant_frame():
    rows = []
    for n in range(64, 1025, 64):
        tiles = 132 * -(-n // 128)
        for impl in ("triton 256x128", "cublas"):
            rows.append({"impl": impl, "M": 33792, "N": n, "K": 2048, "dtype": "float16", "tiles": tiles,
                         "waves": -(-n // 128), "time_s": 1e-5 * -(-n // 128), "tflops": 100.0,
                         "predicted_s": 1.1e-5 * -(-n // 128)})
    return pd.DataFrame(rows)


FRAMES = {
    "plot_alignment": lambda: pd.DataFrame({"dtype": ["float16"] * 9, "K": range(4092, 4101), "M": 4096, "N": 4096,
                                            "alignment": 8, "aligned": [k % 8 == 0 for k in range(4092, 4101)],
                                            "time_s": [2e-4 if k % 8 else 1e-4 for k in range(4092, 4101)]}),
    "plot_quantization_sweep": _quant_frame,
    "plot_tile_sizes": lambda: pd.DataFrame({"impl": ["cublas", "triton 256x128"], "M": 6144, "N": 2816, "K": 4096,
                                             "dtype": "float16", "tflops": [700.0, 500.0], "waves": [np.nan, 4]}),
    "plot_transposes": lambda: pd.DataFrame({"layout": ["NN", "NT", "TN", "TT"], "M": 4096, "N": 4096, "K": 4096,
                                             "dtype": "float16", "tflops": [700.0, 690.0, 650.0, 640.0],
                                             "shape": "square"}),
    "plot_small_n": lambda: pd.DataFrame({"N": [1, 2, 4, 8], "M": 2560, "K": 2560, "dtype": "float16",
                                          "time_s": [4e-6] * 4, "predicted_s": [5e-6] * 4,
                                          "tflops": [3.0, 6.0, 12.0, 24.0], "gbps": [3000.0] * 4}),
    "plot_timers": lambda: pd.DataFrame({"case": ["a", "b"], "perfkit_time_s": [1e-5, 1e-3],
                                         "perfkit_graph_time_s": [8e-6, 1e-3], "triton_do_bench_s": [1.1e-5, 1e-3],
                                         "torch_timer_s": [7e-6, 1e-3]}),
    "plot_waves": lambda: pd.DataFrame({"blocks": [1, 131, 132, 133, 264, 265], "wave_size": 132, "sms": 132,
                                        "blocks_per_sm": 1, "waves": [1, 1, 1, 2, 2, 3],
                                        "time_s": [1e-5, 1e-5, 1e-5, 2e-5, 2e-5, 3e-5]}),
}


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_figure_names_its_source(name):
    fig = getattr(plots, name)(FRAMES[name](), SOURCE)
    assert SOURCE in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("name", sorted(FRAMES) + ["plot_gemm_sizes"])
def test_no_figure_without_data(name, capsys):
    assert getattr(plots, name)(None, "no recording of 'x' yet") is None
    assert "No figure: no recording of 'x' yet" in capsys.readouterr().out


def test_no_model_figure_without_predictions(capsys):
    assert plots.plot_predicted_vs_measured({"a": None}, "no recording yet") is None
    assert "No figure: no recording yet" in capsys.readouterr().out


def test_gemm_sizes_figure_from_a_real_cpu_run():
    frame = gemm.gemm_sizes(device="cpu", quick=True, progress=False)
    fig = plots.plot_gemm_sizes(frame, "live on CPU, today")
    assert "live on CPU, today" in fig._suptitle.get_text()
    assert len(fig.axes) == 4


def test_predicted_vs_measured_reports_the_error():
    frame = pd.DataFrame({"time_s": [1.0, 2.0, 4.0], "predicted_s": [1.1, 2.0, 3.0]})
    fig = plots.plot_predicted_vs_measured({"a": frame, "b": None}, SOURCE)
    title = fig.axes[0].get_title()
    assert "median |error| 10%" in title and "(3 GEMMs)" in title


def test_wave_model_figure():
    fig = plots.plot_wave_model(8, "model of an 8-SM GPU", max_waves=2)
    assert "8 SMs" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="sms"):
        plots.plot_wave_model(0, "x")
