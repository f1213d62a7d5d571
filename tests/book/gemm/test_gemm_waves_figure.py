"""perfkit.book.gemm.plot_gemm_waves: the tiles of a GEMM's output coloured by wave, the partial
last wave hatched, on a GPU named by its spec (chapter 02_gemm, section 5)."""

import dataclasses

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import perfkit as pk  # noqa: E402
from perfkit.book import gemm  # noqa: E402
from perfkit.book.figures import BookFigure  # noqa: E402
from perfkit.provenance import modelled  # noqa: E402
from testkit import A100, H100, heading_text  # noqa: E402


def _hatched(ax) -> list:
    return [p for p in ax.patches if p.get_hatch()]


def test_nvidias_a100_example_hatches_the_nine_tiles_of_the_second_wave():
    fig = gemm.plot_gemm_waves(2304, 1537, (256, 128), A100)
    assert isinstance(fig, BookFigure)
    (ax,) = fig.axes
    text = heading_text(ax)
    assert "117 tiles of 256×128 in 2 waves of 108 (one per SM)" in text
    assert "last wave 9 tiles (8% busy)" in text and "54.2% of the SM-time useful" in text
    assert str(modelled(A100)) in text
    assert ax.images[0].get_array().shape == (9, 13)  # 9 rows × 13 columns of tiles
    hatched = _hatched(ax)
    assert len(hatched) == 9
    # Tiles are numbered row by row: the last 9 are the last row's last 9 columns.
    assert sorted((p.get_x(), p.get_y()) for p in hatched) == [(c * 128, 8 * 256) for c in range(4, 13)]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["wave 1", "wave 2", "partial last wave", "useful 2304×1537 output"]


def test_the_sm_count_comes_from_the_spec():
    fig = gemm.plot_gemm_waves(3072, 1408, (256, 128), "H100-SXM")  # 132 tiles: one full wave
    (ax,) = fig.axes
    assert "132 tiles of 256×128 in 1 wave of 132" in heading_text(ax)
    assert not _hatched(ax) and "partial last wave" not in [t.get_text() for t in ax.get_legend().get_texts()]
    fig = gemm.plot_gemm_waves(3072, 1409, (256, 128), H100, blocks_per_sm=2)
    assert "144 tiles of 256×128 in 1 wave of 264 (2 per SM)" in heading_text(fig.axes[0])
    assert pk.wave_quantization(3072, 1409, (256, 128), H100.sms, 2).waves == 1


def test_bad_input_is_refused():
    with pytest.raises(LookupError):
        gemm.plot_gemm_waves(256, 256, (128, 128), "no such GPU")
    with pytest.raises(ValueError, match="SM count"):
        gemm.plot_gemm_waves(256, 256, (128, 128), dataclasses.replace(H100, sms=0))
    with pytest.raises(ValueError, match="height"):
        gemm.plot_gemm_waves(256, 256, (128, 128), H100, height=0)
    with pytest.raises(ValueError):
        gemm.plot_gemm_waves(0, 256, (128, 128), H100)
