"""The book's chapters, listed once: each folder of :mod:`perfkit.book` and its chapter file.

``chapters/NN_name.md`` is served by the folder ``perfkit/book/name/``; the order is the reading
order of ``_toc.yml`` (a test checks that the two agree).
"""

from __future__ import annotations

#: Folder name → chapter file (without extension), in reading order.
CHAPTERS: dict[str, str] = {
    "background": "01_background",
    "gemm": "02_gemm",
    "fully_connected": "03_fully_connected",
    "recurrent": "04_recurrent",
    "convolutions": "05_convolutions",
    "memory_limited": "06_memory_limited",
    "transformers": "07_transformers",
    "communication": "08_communication",
    "check_your_model": "09_check_your_model",
    "timing": "90_timing",
}

__all__ = ["CHAPTERS"]
