"""Device profiles: what a calibration measured on one device, as a small JSON file, and reading it back.

``python -m perfkit calibrate`` (:mod:`.run`) measures a device's achievable ceilings and builds a
:class:`DeviceProfile`; this module is its type, its JSON form (format ``"perfkit-device-profile"``,
version 1), saving (atomic: a temporary file in the same folder, then :func:`os.replace`) and loading
(strict: a missing key, a value of the wrong type, an unknown dtype or a non-positive ceiling is a
``ValueError`` naming the file and the key path), and :meth:`DeviceProfile.spec`: the
:class:`~perfkit.devices.DeviceSpec` measured on, carrying the measured ceilings.

Units: FLOP/s (OP/s for int8), bytes/s (a copy's bytes read + written), bytes, seconds. Profiles
live in :func:`cache_dir` ``/profiles/<device slug>.json`` (:func:`profile_path`).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .._files import write_atomic
from .._validate import folder as _folder
from ..ceilings import Ceilings
from ..data import device_slug
from ..devices import KNOWN_DEVICES, DeviceSpec
from ..dtypes import canonical_dtype

__all__ = ["FORMAT", "VERSION", "DeviceProfile", "cache_dir", "identity_of", "load_profile", "profile_path",
           "save_profile", "spec_dict"]

FORMAT = "perfkit-device-profile"
VERSION = 1

MODES = ("quick", "default", "thorough")

_Check = Callable[[Any, str], Any]


# The schema: a check takes a value and its key path; it returns the value or raises ValueError naming the path.

def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(path: str, what: str, value: Any):
    raise ValueError(f"{path} must be {what}, got {_show(value)}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _number(kind: type, what: str, ok: Callable[[Any], bool]) -> _Check:
    """A finite ``kind`` (``numbers.Real`` → float, ``numbers.Integral`` → int; never a bool) passing ``ok``."""
    def check(value, path):
        if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) or not ok(value):
            _fail(path, what, value)
        return float(value) if kind is numbers.Real else int(value)
    return check


def _typed(kind: type, what: str) -> _Check:
    def check(value, path):
        if not isinstance(value, kind):
            _fail(path, what, value)
        return value
    return check


_positive = _number(numbers.Real, "a positive number", lambda v: v > 0)
_non_negative = _number(numbers.Real, "a number ≥ 0", lambda v: v >= 0)
_positive_int = _number(numbers.Integral, "a positive integer", lambda v: v > 0)
_count = _number(numbers.Integral, "an integer ≥ 0", lambda v: v >= 0)
_text = _typed(str, "a string")
_flag = _typed(bool, "true or false")


def _optional(check: _Check) -> _Check:
    return lambda value, path: None if value is None else check(value, path)


def _choice(*accepted: str) -> _Check:
    def check(value, path):
        if not isinstance(value, str) or value not in accepted:
            _fail(path, "one of " + ", ".join(map(repr, accepted)), value)
        return value
    return check


def _dtype(value, path):
    """A canonical dtype name (``"bfloat16"``, not ``"bf16"``)."""
    try:
        name = canonical_dtype(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: unknown dtype {value!r} ({e})") from None
    if name != value:
        raise ValueError(f"{path}: dtype {value!r} must be written as {name!r}")
    return name


def _date(value, path):
    """An ISO 8601 date-time such as ``"2026-11-26T10:00:00Z"``."""
    ok = isinstance(value, str) and re.match(r"\d{4}-\d{2}-\d{2}T", value) is not None
    try:
        ok = ok and datetime.fromisoformat(value.replace("Z", "+00:00")) is not None
    except ValueError:
        ok = False
    if not ok:
        _fail(path, "an ISO 8601 date-time such as '2026-11-26T10:00:00Z'", value)
    return value


def _record(optional: Mapping[str, _Check] | None = None, **schema: _Check) -> _Check:
    """An object with exactly these keys, and any of ``optional`` (keys that older profiles lack)."""
    optional = dict(optional or {})

    def check(value, path):
        if not isinstance(value, Mapping):
            _fail(path or "a device profile", "an object", value)
        missing = [k for k in schema if k not in value]
        if missing:
            raise ValueError(f"missing key {_join(path, missing[0])!r} (expected keys: {', '.join(schema)})")
        extra = [k for k in value if k not in schema and k not in optional]
        if extra:
            raise ValueError(f"unknown key {_join(path, str(extra[0]))!r} (expected keys: "
                             f"{', '.join([*schema, *optional])})")
        known = {**schema, **{k: c for k, c in optional.items() if k in value}}
        return {k: c(value[k], _join(path, k)) for k, c in known.items()}
    return check


def _mapping(key: _Check, check: _Check, at_least_one: bool = False) -> _Check:
    """An object whose keys pass ``key`` and values ``check`` (dtype objects need ``at_least_one``)."""
    def each(value, path):
        if not isinstance(value, Mapping):
            _fail(path, "an object", value)
        if at_least_one and not value:
            raise ValueError(f"{path} must hold at least one dtype, got {{}}")
        return {key(k, path): check(v, _join(path, str(k))) for k, v in value.items()}
    return each


def _list_of(check: _Check) -> _Check:
    def each(value, path):
        if not isinstance(value, (list, tuple)):
            _fail(path, "a list", value)
        return [check(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return each


#: A device's layout (DeviceSpec's vendor, dies, warp_size, llc_bytes): older profiles lack it (optional).
_LAYOUT = {"vendor": _text, "dies": _positive_int, "warp_size": _positive_int,
           "llc_bytes": _optional(_positive_int)}
_DEVICE = _record(_LAYOUT, name=_text, kind=_choice("gpu", "cpu"), sms=_optional(_positive_int),
                  mem_bandwidth=_optional(_positive), l2_bytes=_optional(_positive_int),
                  memory_bytes=_optional(_positive_int), peaks=_mapping(_dtype, _positive),
                  sources=_mapping(_text, _text), driver_name=_optional(_text))
_IDENTITY = _record(name=_text, kind=_choice("gpu", "cpu"), driver_name=_optional(_text), model=_optional(_text))
_ENVIRONMENT = _record({"hip": _optional(_text)}, date=_date, perfkit=_text, torch=_optional(_text),
                       cuda=_optional(_text), driver=_optional(_text), python=_text, platform=_text)
_MATMUL = _mapping(_dtype, _record(flop_s=_positive, M=_positive_int, N=_positive_int, K=_positive_int,
                             time_s=_positive, trials=_positive_int, how=_text, wide_flop_s=_optional(_positive),
                             wide_trials=_optional(_positive_int)), True)
_COPY = _record(bandwidth=_positive, bytes=_positive_int, how=_text,
                rows=_list_of(_record(bytes=_positive_int, time_s=_positive, bandwidth=_positive)))
_L2 = _optional(_record(bandwidth=_positive, bytes=_positive_int, dram_bandwidth=_positive, ratio=_positive,
                        shows=_flag, how=_text))
_LATENCY = _record(gemm_s=_positive, kernel_s=_positive, graph_s=_optional(_positive), how=_text)
_ERROR = _record(median_abs=_non_negative, p90_abs=_non_negative, n=_count)
_VALIDATION = _record(rows=_list_of(_record(kind=_text, shape=_text, dtype=_dtype, bytes=_count, flops=_count,
                                            measured_s=_positive, before_s=_positive, after_s=_positive)),
                      before=_ERROR, after=_ERROR)
_SEARCH = _list_of(_record(dtype=_dtype, method=_text, stage=_text, M=_positive_int, N=_positive_int,
                           K=_positive_int, time_s=_positive, flop_s=_positive, predicted_s=_positive))
_PROFILE = _record(device=_DEVICE, identity=_IDENTITY, environment=_ENVIRONMENT, mode=_choice(*MODES),
                   duration_s=_non_negative, matmul=_MATMUL, copy=_COPY, l2=_L2, latency=_LATENCY,
                   validation=_VALIDATION, search=_SEARCH)


def _checked(data: Mapping, where: str) -> dict:
    """``data`` (a profile's keys but format and version) as plain JSON values; ``ValueError`` naming
    ``where`` and the key path of the first problem."""
    try:
        out = _PROFILE(data, "")
        for key in ("name", "kind", "driver_name"):
            if out["identity"][key] != out["device"][key]:
                raise ValueError(f"identity.{key} must be the device's {key} {out['device'][key]!r}, "
                                 f"got {_show(out['identity'][key])}")
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return out


@dataclass(frozen=True)
class DeviceProfile:
    """What one calibration measured on one device (the module docstring has the JSON form).

    Construction copies the fields as plain JSON values (mappings → dicts, tuples → lists, numpy
    numbers → Python ones) without checking them, so that a calibration can build a draft;
    :meth:`to_json` (and so :func:`save_profile`) checks them as :func:`load_profile` does
    (``ValueError`` naming the key path): a profile that is written can be read back, and
    ``from_json(p.to_json()) == p``.
    """

    device: dict  # spec_dict of the DeviceSpec measured on (no ceilings)
    identity: dict  # identity_of that spec: name, kind, driver_name, model
    environment: dict  # date (ISO 8601, UTC), perfkit, torch, cuda, driver, python, platform versions (and hip)
    mode: str  # "quick", "default" or "thorough"
    duration_s: float  # how long the calibration ran, seconds
    matmul: dict  # dtype → best measured GEMM: flop_s, M, N, K, time_s, trials, how, wide_flop_s, wide_trials
    copy: dict  # bandwidth (bytes/s, read + written), bytes, how; rows: every copy timed (bytes, time_s, bandwidth)
    l2: dict | None  # bandwidth, bytes, dram_bandwidth, ratio, shows, how; None where not measured
    latency: dict  # gemm_s, kernel_s, graph_s (seconds), how
    validation: dict  # rows, and the model's |error| before and after calibration (median_abs, p90_abs, n)
    search: list  # every timing of the shape search: dtype, method, stage, M, N, K, time_s, flop_s, predicted_s

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, _plain(getattr(self, f.name)))

    def to_json(self) -> str:
        """The profile as JSON text (``indent=1``, keys in schema order, format and version first);
        ``ValueError`` naming the key path if a value could not be read back (:func:`load_profile`)."""
        fields_ = _checked({f.name: getattr(self, f.name) for f in fields(self)}, "DeviceProfile")
        data = {"format": FORMAT, "version": VERSION, **fields_}
        return json.dumps(data, indent=1, sort_keys=False, allow_nan=False, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, where: str = "profile") -> DeviceProfile:
        """The profile in JSON ``text``; ``ValueError`` naming ``where`` (e.g. the file) and the problem:
        not JSON, not a perfkit device profile, a newer version, or a bad key (see :func:`load_profile`)."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise TypeError(f"text must be the JSON text of a device profile (str), got {type(text).__name__}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
        if not isinstance(data, dict):
            kind = {list: "list", str: "string", type(None): "null"}.get(type(data), "number or boolean")
            raise ValueError(f"{where} is not a perfkit device profile: it holds a JSON {kind}, not an object")
        if data.get("format") != FORMAT:
            found = f"its format is {_show(data['format'])}" if "format" in data else "it has no \"format\" key"
            raise ValueError(f"{where} is not a perfkit device profile ({found}; expected {FORMAT!r})")
        version = data.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
            raise ValueError(f"{where} was written by a newer perfkit: version {version}, this perfkit reads "
                             f"{VERSION}; upgrade perfkit or calibrate again")
        if version != VERSION or isinstance(version, bool):
            raise ValueError(f"{where}: version must be {VERSION}, got {_show(version)}")
        rest = {k: v for k, v in data.items() if k not in ("format", "version")}
        return cls(**_checked(rest, where))

    @property
    def date(self) -> str:
        """The day the calibration ran, ``YYYY-MM-DD`` (UTC)."""
        return self.environment["date"][:10]

    def ceilings(self) -> Ceilings:
        """The measured ceilings: best GEMM throughput per dtype (FLOP/s), copy bandwidth (bytes/s) and
        the fixed costs of a GEMM and of a memory-bound kernel (seconds)."""
        return Ceilings(flop_s={d: m["flop_s"] for d, m in self.matmul.items()}, bandwidth=self.copy["bandwidth"],
                        source=f"calibrated on {self.date} ({self.mode} search, {self.device['name']})",
                        gemm_latency_s=self.latency["gemm_s"], kernel_latency_s=self.latency["kernel_s"])

    def spec(self, origin: str | os.PathLike | None = None) -> DeviceSpec:
        """The :class:`DeviceSpec` measured on, with :meth:`ceilings` attached (``measured_ceilings``);
        ``origin`` (e.g. the profile's path) is named in ``sources["ceilings"]``.

        A device whose peaks are themselves measured (a CPU, or an unknown GPU: ``sources["peaks"]``
        starts with "measured") has them raised to at least the calibrated throughput per dtype, and
        its bandwidth to at least the calibrated copy bandwidth: the models never use a ceiling above
        the spec's peak, and such a peak is only a quick floor. A datasheet's peaks are kept.
        """
        if origin is not None and not isinstance(origin, (str, os.PathLike)):
            raise TypeError(f"origin must be None or where the profile came from (str or os.PathLike), got {origin!r}")
        d, ceilings = self.device, self.ceilings()
        peaks, sources, bandwidth = dict(d["peaks"]), dict(d["sources"]), d["mem_bandwidth"]
        if d["kind"] == "cpu" or sources.get("peaks", "").startswith("measured"):
            raised = [k for k, v in ceilings.flop_s.items() if v > peaks.get(k, 0.0)]
            if raised:
                peaks.update({k: ceilings.flop_s[k] for k in raised})
                sources["peaks"] = (f"{sources.get('peaks', 'measured')}; raised to the calibrated throughput "
                                    f"for {', '.join(raised)} (calibration of {self.date})")
            if bandwidth is not None and ceilings.bandwidth > bandwidth:
                bandwidth = ceilings.bandwidth
                sources["mem_bandwidth"] = (f"{sources.get('mem_bandwidth', 'measured')}; raised to the calibrated "
                                            f"copy bandwidth (calibration of {self.date})")
        if bandwidth is None:
            bandwidth = ceilings.bandwidth
            sources["mem_bandwidth"] = f"the calibrated copy bandwidth (calibration of {self.date}; no other figure)"
        sources["ceilings"] = (f"measured by a perfkit calibration on {self.date} ({self.mode} search)"
                               + (f" (profile {origin})" if origin is not None else ""))
        known = KNOWN_DEVICES.get(d["name"])  # an older profile lacks the layout: its table entry's, if any
        layout = {k: d[k] if k in d else getattr(known, k) for k in _LAYOUT if k in d or known}
        return DeviceSpec(name=d["name"], kind=d["kind"], sms=d["sms"], mem_bandwidth=bandwidth,
                          l2_bytes=d["l2_bytes"], memory_bytes=d["memory_bytes"], peaks=peaks, sources=sources,
                          driver_name=d["driver_name"], measured_ceilings=ceilings, **layout)

    def matches(self, spec: DeviceSpec, *, model: str | None = None) -> bool:
        """Whether this profile was measured on ``spec``'s device: the same kind and name, the same
        ``driver_name`` when both have one, and the same ``model`` (e.g. a CPU's model string, which a
        spec does not carry) when both the profile's identity and the caller give one."""
        spec, model = _spec(spec), _model(model)
        me = self.identity
        return (me["kind"] == spec.kind and me["name"] == spec.name
                and (me["driver_name"] is None or spec.driver_name is None or me["driver_name"] == spec.driver_name)
                and (me["model"] is None or model is None or me["model"] == model))


def _plain(value: Any) -> Any:
    """A deep copy of ``value`` as plain JSON values (mappings → dicts, tuples → lists, numpy → Python)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _spec(spec: Any) -> DeviceSpec:
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be a DeviceSpec (e.g. perfkit.device_spec('H100-SXM')), got {spec!r}")
    return spec


def _model(model: Any) -> str | None:
    if model is not None and not isinstance(model, str):
        raise TypeError(f"model must be None or a device model string such as a CPU's, got {model!r}")
    return model


def spec_dict(spec: DeviceSpec) -> dict:
    """``spec`` as a profile's ``"device"`` object (plain JSON values; its measured ceilings left out)."""
    spec = _spec(spec)
    return {"name": spec.name, "kind": spec.kind, "sms": spec.sms, "mem_bandwidth": spec.mem_bandwidth,
            "l2_bytes": spec.l2_bytes, "memory_bytes": spec.memory_bytes, "peaks": dict(spec.peaks),
            "sources": dict(spec.sources), "driver_name": spec.driver_name,
            **{k: getattr(spec, k) for k in _LAYOUT}}


def identity_of(spec: DeviceSpec, model: str | None = None) -> dict:
    """What says which device a profile belongs to: ``spec``'s name, kind and driver name, and
    ``model`` (e.g. a CPU's model string, which the spec does not carry)."""
    spec, model = _spec(spec), _model(model)
    return {"name": spec.name, "kind": spec.kind, "driver_name": spec.driver_name, "model": model}


def save_profile(profile: DeviceProfile, path: str | os.PathLike) -> Path:
    """Write ``profile`` to ``path`` atomically and return the path: the JSON goes to a temporary file
    in the same folder (folders are created), which then replaces ``path``; a write that fails or is
    interrupted leaves ``path`` as it was (absent, or the previous profile) and no temporary file."""
    if not isinstance(profile, DeviceProfile):
        raise TypeError(f"profile must be a DeviceProfile, got {type(profile).__name__}")
    path = _folder("path", path)
    text = profile.to_json()
    write_atomic(path, (text + "\n").encode("utf-8"))
    return path


def load_profile(path: str | os.PathLike) -> DeviceProfile:
    """The device profile in ``path``. ``FileNotFoundError`` if there is none; ``ValueError`` naming
    the path and the problem for a file that is not JSON, not a perfkit device profile, written by a
    newer perfkit, or has a missing key, a value of the wrong type, an unknown dtype, or a ceiling
    that is not a positive finite number (the key path is named, e.g. ``matmul.bfloat16.flop_s``)."""
    path = _folder("path", path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"no device profile at {path}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return DeviceProfile.from_json(text, where=str(path))


def cache_dir() -> Path:
    """perfkit's cache folder: ``$PERFKIT_CACHE``, else ``$XDG_CACHE_HOME/perfkit`` (an absolute
    ``XDG_CACHE_HOME`` only, as the XDG spec says), else ``~/.cache/perfkit``. Not created here."""
    own = os.environ.get("PERFKIT_CACHE")
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "perfkit"
    return Path.home() / ".cache" / "perfkit"


def profile_path(name: str, folder: str | os.PathLike | None = None) -> Path:
    """Where the profile of device ``name`` is saved: ``<folder or cache_dir()>/profiles/<slug>.json``
    (:func:`perfkit.data.device_slug`, e.g. ``h100-sxm.json``)."""
    base = cache_dir() if folder is None else _folder("folder", folder)
    return base / "profiles" / f"{device_slug(name)}.json"
