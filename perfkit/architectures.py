"""GPU architecture families: which generation a device belongs to, so evidence recorded on one GPU of a
family (our H200 for Hopper, DeepBench's V100 for Volta) gives defaults to every GPU of it.

A device's family follows from its name in perfkit's device table (:data:`perfkit.devices.KNOWN_DEVICES`)
or from the driver's name (``"NVIDIA H100 80GB HBM3"``). Families are ordered by generation
(:data:`FAMILIES`), so "the nearest family with evidence" is well defined.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["FAMILIES", "evidence_of", "family", "nearest_family"]

#: NVIDIA generations, oldest first; "cpu" and "unknown" stand outside the order.
FAMILIES: tuple[str, ...] = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")

# (pattern on the device's name, family): first match wins.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\b(P100|P40|P4|GTX 10\d\d|TITAN X)\b", "pascal"),
    (r"\b(V100|TITAN V)\b", "volta"),
    (r"\b(T4|RTX 20\d\d|TITAN RTX|QUADRO RTX)\b", "turing"),
    (r"\b(A100|A10G?|A30|A40|A16|A2|RTX 30\d\d|RTX A\d+)\b", "ampere"),
    (r"\b(L4|L40S?|RTX 40\d\d|RTX \d+ ADA)\b", "ada"),
    (r"\b(H100|H800|H200|H20|GH200)\b", "hopper"),
    (r"\b(B100|B200|B300|GB200|GB300|RTX 50\d\d|RTX PRO 6000)\b", "blackwell"),
)


def family(spec: Any) -> str:
    """The architecture family of ``spec`` (a :class:`~perfkit.devices.DeviceSpec` or a device name):
    one of :data:`FAMILIES`, ``"cpu"``, or ``"unknown"`` for a GPU perfkit cannot place."""
    if isinstance(spec, str):
        names, kind = [spec], "gpu"
    elif hasattr(spec, "name") and hasattr(spec, "kind"):
        names, kind = [spec.name, getattr(spec, "driver_name", None) or ""], spec.kind
    else:
        raise TypeError(f"spec must be a DeviceSpec or a device name such as 'H100-SXM', got {spec!r}")
    if kind == "cpu":
        return "cpu"
    for name in names:
        text = re.sub(r"[-_]", " ", name).upper()
        for pattern, fam in _PATTERNS:
            if re.search(pattern, text):
                return fam
    return "unknown"


def nearest_family(fam: str, known: Any) -> str | None:
    """Of the families in ``known``, the one nearest to ``fam`` by generation (the newer on a tie);
    None if ``known`` holds none of :data:`FAMILIES` or ``fam`` is not one (a CPU, an unknown GPU: the
    newest known family then stands in, as the least surprising default)."""
    ranked = [f for f in FAMILIES if f in set(known)]
    if not ranked:
        return None
    if fam not in FAMILIES:
        return ranked[-1]
    i = FAMILIES.index(fam)
    return min(ranked, key=lambda f: (abs(FAMILIES.index(f) - i), -FAMILIES.index(f)))


def evidence_of(spec: Any, table: Mapping[str, Any]) -> tuple[Any, str]:
    """``(entry, label)``: ``table``'s entry (family → constants with a ``source``) for ``spec``'s family, or
    the nearest family's (the newest when ``spec``'s family is unknown), its label then saying it is assumed."""
    fam = family(spec)
    if fam in table:
        return table[fam], table[fam].source
    near = nearest_family(fam, table) or next(reversed(list(table)))
    entry = table[near]
    return entry, f"assumed from {near} ({entry.source}); no {fam} GPU measured yet"
