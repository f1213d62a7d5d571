"""What many tests need, in one place: the repository's paths, the devices they use, frames with metadata.

``from testkit import REPO, H100, framed`` (``tests/`` is on ``sys.path``: pytest's ``pythonpath``).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "perfkit"
CHAPTERS = REPO / "chapters"
SCRIPTS = REPO / "scripts"
DATA = REPO / "data"
