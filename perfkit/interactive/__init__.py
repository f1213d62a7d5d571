"""Interactive figures that work without a kernel (Plotly sliders and menus over states computed
by perfkit), one module per chapter. Each function returns an :class:`InteractiveFigure`, which
displays itself in Jupyter, Colab and the built book.

Importing this package imports Plotly; ``perfkit`` itself imports it only when asked
(``pk.interactive``).
"""

from __future__ import annotations

from . import advisor, background, conv, fc, gemm, memory, rnn, timing
from ._figure import PLOTLY_JS_URL, InteractiveFigure, State, heading, rounded, with_menu, with_slider

#: The chapter modules, in reading order; each has ``FIGURES`` (name → builder with defaults).
CHAPTERS = {"01_background": background, "02_gemm": gemm, "03_fully_connected": fc,
            "04_recurrent": rnn, "05_convolutions": conv, "06_memory_limited": memory,
            "07_check_your_model": advisor, "90_timing": timing}

__all__ = ["CHAPTERS", "InteractiveFigure", "PLOTLY_JS_URL", "State", "heading", "rounded", "with_menu", "with_slider"]
