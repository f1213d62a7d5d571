"""perfkit.architectures: which generation a GPU belongs to, and the nearest one with evidence."""

from __future__ import annotations

import pytest

from perfkit.architectures import FAMILIES, family, nearest_family
from perfkit.devices import KNOWN_DEVICES, current_device

EXPECTED = {"V100-SXM2": "volta", "P100-SXM2": "pascal", "A100-SXM4-80GB": "ampere", "A10": "ampere",
            "T4": "turing", "L4": "ada", "RTX-4090": "ada", "H100-SXM": "hopper", "H200": "hopper", "H800": "hopper"}


@pytest.mark.parametrize("name, fam", sorted(EXPECTED.items()))
def test_the_table_devices_have_their_family(name, fam):
    assert family(KNOWN_DEVICES[name]) == fam


def test_every_table_gpu_is_placed():
    assert {family(d) for d in KNOWN_DEVICES.values()} <= set(FAMILIES)


@pytest.mark.parametrize("driver, fam", [("NVIDIA H100 80GB HBM3", "hopper"), ("Tesla T4", "turing"),
                                         ("NVIDIA A10G", "ampere"), ("NVIDIA GeForce RTX 4090", "ada"),
                                         ("NVIDIA B200", "blackwell"), ("Some Future GPU", "unknown")])
def test_driver_names(driver, fam):
    assert family(driver) == fam


def test_a_cpu_is_a_cpu():
    if current_device().kind == "cpu":
        assert family(current_device()) == "cpu"


def test_nearest_family_by_generation_newer_on_a_tie():
    assert nearest_family("hopper", {"hopper", "volta"}) == "hopper"
    assert nearest_family("turing", {"hopper", "volta"}) == "volta"
    assert nearest_family("ampere", {"hopper", "volta"}) == "hopper"  # two generations either way: the newer
    assert nearest_family("unknown", {"volta", "ampere"}) == "ampere"
    assert nearest_family("hopper", set()) is None


def test_bad_input():
    with pytest.raises(TypeError, match="DeviceSpec or a device name"):
        family(3)
