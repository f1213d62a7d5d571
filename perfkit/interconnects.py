"""Interconnects: the links between GPUs, as datasheets give them and as a collective library reaches them.

A :class:`LinkSpec` holds what the α-β model of :mod:`perfkit.collectives` needs of a link:

- ``bandwidth_bytes_s``: the datasheet's rate **per GPU, per direction** (NVLink: all of a GPU's
  links together; PCIe: one x16 slot; InfiniBand and Ethernet: one port, i.e. one NIC);
- ``efficiency``: the fraction of it that NCCL reaches. These are NCCL's own figures, not fits: NCCL
  models a link by the bandwidth it reaches on it (``src/graph/topo.h`` and ``topo.cc``, NVIDIA/nccl @
  069a3d4f): 20.0 GB/s per NVLink 2 or 3 link, 20.6 per NVLink 4 link and 40.1 per NVLink 5 link (line
  rates 25, 25, 25 and 50 GB/s: SMs move 128-byte payloads, so about 20 % of the line goes to protocol);
  ``width·speed/80`` for PCIe, 12 GB/s for a Gen3 x16 slot (15.75 on the datasheet), 24 for Gen4, 48
  for Gen5; 12 GB/s for a 100 Gb/s NIC (12.5). An NCCL maintainer gives the same for H100 (nccl-tests
  issue #212: 450 GB/s line rate, ~370 GB/s effective, seen as busbw with ``NCCL_ALGO=RING``) and A100
  (issue #149: ~20 GB/s per 25 GB/s link; 230 GB/s for 12 links);
- ``latency_s`` (α): the cost of one step of an algorithm, from NCCL's own cost model
  (``src/graph/tuning.cc`` @ b6475625, ``hwLat``, Ring, Simple protocol): 3.4 µs per step over NVLink,
  5.7 over PCIe, 14 over the network. NCCL switches to its LL protocols for small messages
  (0.6–2.7 µs per step); one α per link keeps the model a straight line, and it is the protocol that
  carries large messages;
- ``in_switch_reduction``: the GPUs hang off an NVSwitch that can add (NVLink SHARP, NCCL's NVLS
  algorithm: third-generation NVSwitch, H100 HGX, and later).

Units: bytes/s, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .units import GIGA

__all__ = ["KNOWN_LINKS", "LinkSpec", "link_spec"]


@dataclass(frozen=True)
class LinkSpec:
    """One kind of link between GPUs: its datasheet bandwidth, the fraction a collective library reaches,
    and α, the fixed cost of one algorithm step. ``source`` says where the numbers come from."""

    key: str  # short lower-case name: "nvlink4"
    name: str  # "NVLink 4 (H100 SXM: 18 links)"
    kind: str  # "nvlink", "pcie", "infiniband" or "ethernet"
    bandwidth_bytes_s: float  # datasheet, per GPU (per port/NIC), per direction, bytes/s
    efficiency: float  # achievable fraction of bandwidth_bytes_s (NCCL's figure, see the module)
    latency_s: float  # α: one algorithm step (launch + sync + wire), seconds
    in_switch_reduction: bool = False  # NVSwitch gen 3+ (NVLink SHARP / NCCL's NVLS)
    source: str = ""

    @property
    def achievable_bytes_s(self) -> float:
        """The bandwidth a collective library reaches per direction: ``bandwidth_bytes_s × efficiency`` (bytes/s)."""
        return self.bandwidth_bytes_s * self.efficiency


#: NCCL's α per algorithm step (tuning.cc ``hwLat``, Ring/Simple), seconds.
_NVLINK_ALPHA_S, _PCIE_ALPHA_S, _NET_ALPHA_S = 3.4e-6, 5.7e-6, 14.0e-6
_ALPHA = ("α: NCCL's cost model (NVIDIA/nccl src/graph/tuning.cc @ b6475625, hwLat Ring/Simple: "
          "NVLink 3.4, PCI 5.7, NET 14 microseconds per step)")
_NCCL_BW = "efficiency: NCCL's effective bandwidth (NVIDIA/nccl src/graph/topo.h, topo.cc @ 069a3d4f)"
#: NCCL's 12 GB/s per 100 Gb/s NIC (topo.h NET_BW).
_NET_EFFICIENCY = 12.0 / 12.5


def _link(key, name, kind, gb_s, efficiency, alpha, source, switch=False) -> LinkSpec:
    return LinkSpec(key=key, name=name, kind=kind, bandwidth_bytes_s=gb_s * GIGA, efficiency=efficiency,
                    latency_s=alpha, in_switch_reduction=switch, source=f"{source}; {_NCCL_BW}; {_ALPHA}")


def _nic(key, name, kind, gbit_s, source, efficiency=_NET_EFFICIENCY) -> LinkSpec:
    return _link(key, name, kind, gbit_s / 8, efficiency, _NET_ALPHA_S, source)


KNOWN_LINKS: dict[str, LinkSpec] = {s.key: s for s in (
    # NVLink: 25 GB/s per link per direction (NVLink 2-4), 50 (NVLink 5); the datasheets quote both
    # directions together (V100 300 GB/s, A100 600, H100 900, B200 1.8 TB/s).
    _link("nvlink2", "NVLink 2 (V100 SXM2: 6 links)", "nvlink", 150, 20.0 / 25, _NVLINK_ALPHA_S,
          "NVIDIA V100 datasheet: NVLink 300 GB/s both directions (6 links x 25 GB/s each way); "
          "DGX-1's hybrid cube-mesh joins each pair by 1-2 links, DGX-2's NVSwitch by all 6"),
    _link("nvlink3", "NVLink 3 (A100 SXM: 12 links)", "nvlink", 300, 20.0 / 25, _NVLINK_ALPHA_S,
          "NVIDIA A100 datasheet: NVLink 600 GB/s both directions (12 links x 25 GB/s each way); "
          "NVSwitch gen 2 (HGX A100) has no in-switch reduction"),
    _link("nvlink4", "NVLink 4 (H100 SXM: 18 links)", "nvlink", 450, 20.6 / 25, _NVLINK_ALPHA_S,
          "NVIDIA H100 datasheet: NVLink 900 GB/s both directions (18 links x 25 GB/s each way), same on "
          "H200 SXM; NVSwitch gen 3 (HGX H100) reduces in the switch (NVLink SHARP)", switch=True),
    _link("nvlink5", "NVLink 5 (B200: 18 links)", "nvlink", 900, 40.1 / 50, _NVLINK_ALPHA_S,
          "NVIDIA Blackwell (HGX B200) datasheet: NVLink 1.8 TB/s both directions (18 links x 50 GB/s "
          "each way); NVSwitch gen 4 reduces in the switch", switch=True),
    # PCIe x16, per direction: 8/16/32 GT/s x 16 lanes x 128b/130b.
    _link("pcie3", "PCIe 3.0 x16", "pcie", 15.75, 12.0 / 15.75, _PCIE_ALPHA_S,
          "PCI-SIG PCIe 3.0: 8 GT/s per lane, 128b/130b, x16 = 15.75 GB/s per direction"),
    _link("pcie4", "PCIe 4.0 x16", "pcie", 31.5, 24.0 / 31.5, _PCIE_ALPHA_S,
          "PCI-SIG PCIe 4.0: 16 GT/s per lane, 128b/130b, x16 = 31.5 GB/s per direction"),
    _link("pcie5", "PCIe 5.0 x16", "pcie", 63.0, 48.0 / 63.0, _PCIE_ALPHA_S,
          "PCI-SIG PCIe 5.0: 32 GT/s per lane, 128b/130b, x16 = 63 GB/s per direction"),
    # InfiniBand 4x ports. FDR's 56 Gb/s is the signalling rate (4 x 14.0625 Gbaud, 64b/66b: 54.5 Gb/s
    # of data), so its efficiency carries that coding loss too; EDR, HDR and NDR are quoted as data rates.
    _nic("ib-fdr", "InfiniBand FDR (4x, 56 Gb/s)", "infiniband", 56,
         "InfiniBand Trade Association roadmap: FDR 4x 56 Gb/s (54.5 Gb/s of data after 64b/66b)",
         efficiency=_NET_EFFICIENCY * 54.5 / 56),
    _nic("ib-edr", "InfiniBand EDR (4x, 100 Gb/s)", "infiniband", 100,
         "InfiniBand Trade Association roadmap: EDR 4x 100 Gb/s (e.g. Mellanox ConnectX-4)"),
    _nic("ib-hdr", "InfiniBand HDR (4x, 200 Gb/s)", "infiniband", 200,
         "InfiniBand Trade Association roadmap: HDR 4x 200 Gb/s (ConnectX-6; DGX A100: one per GPU)"),
    _nic("ib-ndr", "InfiniBand NDR (4x, 400 Gb/s)", "infiniband", 400,
         "InfiniBand Trade Association roadmap: NDR 4x 400 Gb/s (ConnectX-7; DGX H100: one per GPU)"),
    # Ethernet with RDMA (RoCE) through NCCL's IB transport; over plain TCP sockets NCCL reaches far less.
    _nic("ethernet-25g", "Ethernet 25 GbE (RoCE)", "ethernet", 25, "IEEE 802.3by: 25 Gb/s"),
    _nic("ethernet-100g", "Ethernet 100 GbE (RoCE)", "ethernet", 100, "IEEE 802.3: 100 Gb/s"),
    _nic("ethernet-400g", "Ethernet 400 GbE (RoCE)", "ethernet", 400, "IEEE 802.3bs: 400 Gb/s"),
)}


def link_spec(link: Any) -> LinkSpec:
    """The :class:`LinkSpec` for ``link``: a key of :data:`KNOWN_LINKS` (any case, e.g. ``"NVLink4"``),
    or a LinkSpec, returned as it is (your own link: ``dataclasses.replace(link_spec("pcie4"), efficiency=0.7)``).

    ``LookupError`` naming the known keys for an unknown one; ``TypeError`` for anything but a string or a LinkSpec.
    """
    if isinstance(link, LinkSpec):
        return link
    if not isinstance(link, str):
        raise TypeError(f"link must be a LinkSpec or the name of a known link such as 'nvlink4', "
                        f"got {link!r} ({type(link).__name__})")
    key = link.strip().lower()
    if key not in KNOWN_LINKS:
        raise LookupError(f"unknown link {link!r}; known links: {', '.join(KNOWN_LINKS)}")
    return KNOWN_LINKS[key]
