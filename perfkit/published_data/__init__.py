"""Published third-party measurements: read from a folder beside perfkit, never shipped with it.

:func:`published` reads one table (``pk.published("xla_h100_gemm", "H100-SXM")``),
:func:`published_sources` lists what perfkit knows and what is here, :func:`published_root` says
where it looks (``$PERFKIT_PUBLISHED``, ``../shared/reference/published`` beside a checkout, then
``~/.cache/perfkit/published``), and ``python -m perfkit published fetch`` (:mod:`.fetch`) obtains
each source from its public repository at the pinned commit. The catalogue (:data:`CATALOG`) says
where each table comes from, its licence and how its publisher timed.
"""

from .catalog import CATALOG, PublishedSource
from .notes import PUBLISHED_ABSENT, absent_note, printed, published_absent
from .read import (ENV, HOW_TO_GET, PublishedDataMissing, describe, has_published, published, published_all,
    published_or_none, published_root, published_sources)

__all__ = ["CATALOG", "ENV", "HOW_TO_GET", "PUBLISHED_ABSENT", "PublishedDataMissing", "PublishedSource", "absent_note",
           "describe", "has_published", "printed", "published", "published_absent", "published_all", "published_or_none",
           "published_root", "published_sources"]
