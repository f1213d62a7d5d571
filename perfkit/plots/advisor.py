"""Figures of the chapter "Check your own model" (the advisor): where a step's time goes, what the fixes
save, and the advisor's predictions against measurements."""

from __future__ import annotations

__all__: list[str] = []
