"""GPU architecture families: which generation a device belongs to, so evidence recorded on one GPU of a
family (our H200 for Hopper, DeepBench's V100 for Volta) gives defaults to every GPU of it.

A device's family follows from its name in perfkit's device table (:data:`perfkit.devices.KNOWN_DEVICES`)
or from the driver's name (``"NVIDIA H100 80GB HBM3"``). Families are ordered by generation
(:data:`FAMILIES`), so "the nearest family with evidence" is well defined.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["FAMILIES", "PEERS", "VENDOR", "evidence_of", "family", "nearest_family"]

#: GPU generations, oldest first: NVIDIA's, then AMD Instinct's CDNA (each placed after the NVIDIA one of its
#: time, :data:`PEERS`); "cpu" and "unknown" stand outside the order.
FAMILIES: tuple[str, ...] = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4")

#: The vendor of each family.
VENDOR: dict[str, str] = {**{f: "NVIDIA" for f in FAMILIES[:7]}, "cdna3": "AMD", "cdna4": "AMD"}

#: An AMD family's NVIDIA contemporary: where a default has no AMD evidence, the contemporary's stands in
#: (labelled assumed), not the newest NVIDIA's.
PEERS: dict[str, str] = {"cdna3": "hopper", "cdna4": "blackwell"}

# (pattern on the device's name, family): first match wins.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\b(P100|P40|P4|GTX 10\d\d|TITAN X)\b", "pascal"),
    (r"\b(V100|TITAN V)\b", "volta"),
    (r"\b(T4|RTX 20\d\d|TITAN RTX|QUADRO RTX)\b", "turing"),
    (r"\b(A100|A10G?|A30|A40|A16|A2|RTX 30\d\d|RTX A\d+)\b", "ampere"),
    (r"\b(L4|L40S?|RTX 40\d\d|RTX \d+ ADA)\b", "ada"),
    (r"\b(H100|H800|H200|H20|GH200)\b", "hopper"),
    (r"\b(B100|B200|B300|GB200|GB300|RTX 50\d\d|RTX PRO 6000)\b", "blackwell"),
    (r"\b(MI300X?|MI300A|MI325X|GFX942)\b", "cdna3"),
    (r"\b(MI350X|MI355X|GFX950)\b", "cdna4"),
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
    """Of the families in ``known``, the one nearest to ``fam`` by generation within its vendor (the newer on
    a tie); an AMD family without an AMD one in ``known`` takes its NVIDIA contemporary's nearest
    (:data:`PEERS`). None if ``known`` holds none of :data:`FAMILIES`; for a ``fam`` that is not one (a CPU,
    an unknown GPU) the newest known NVIDIA family stands in, as the least surprising default."""
    known = set(known)
    ranked = [f for f in FAMILIES if f in known]
    if not ranked:
        return None
    if fam not in FAMILIES:
        nvidia = [f for f in ranked if VENDOR[f] == "NVIDIA"]
        return (nvidia or ranked)[-1]
    same = [f for f in ranked if VENDOR[f] == VENDOR[fam]]
    if not same and fam in PEERS:
        return nearest_family(PEERS[fam], known)
    pool = same or ranked
    i = FAMILIES.index(fam)
    return min(pool, key=lambda f: (abs(FAMILIES.index(f) - i), -FAMILIES.index(f)))


def evidence_of(spec: Any, table: Mapping[str, Any]) -> tuple[Any, str]:
    """``(entry, label)``: ``table``'s entry (family → constants with a ``source``) for ``spec``'s family, or
    the nearest family's (the newest when ``spec``'s family is unknown), its label then saying it is assumed."""
    fam = family(spec)
    if fam in table:
        return table[fam], table[fam].source
    near = nearest_family(fam, table) or next(reversed(list(table)))
    entry = table[near]
    return entry, f"assumed from {near} ({entry.source}); no {fam} GPU measured yet"
