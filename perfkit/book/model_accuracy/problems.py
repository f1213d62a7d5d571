"""The problems of the appendix 91_model_accuracy, with answers computed by perfkit."""

from __future__ import annotations

from ..exercise import Exercise

CHAPTER = "91_model_accuracy"

EXERCISES: list[Exercise] = []
