"""The published profiler traces (perfkit.published_data.traces): where perfkit looks for them, what it
says when they are absent, how it checks them, and that its catalogue agrees with the shared folder's
README and with the files themselves (those checks skip, saying why, where ../shared is absent)."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.provenance import from_meta
from perfkit.published_data import traces as pt

#: Where this project keeps the traces: ``../shared/reference/traces`` beside the checkout.
SHARED_TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "traces"
needs_shared = pytest.mark.skipif(not SHARED_TRACES.is_dir(),
                                  reason=f"the published traces are not here ({pt.HOW_TO_GET})")


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(pt.ENV, raising=False)


def _fake(folder: Path, name: str, data: bytes = b"not the trace") -> Path:
    path = folder / pt.TRACES[name].file
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------------------------ the catalogue
def test_the_catalogue_names_each_trace_its_source_and_a_gpu_perfkit_knows():
    assert {"h100_vit_base", "h100_bert_small", "v100_resnet50_training"} <= set(pt.TRACES)
    files = [e.file for e in pt.TRACES.values()]
    assert len(set(files)) == len(files)
    for name, e in pt.TRACES.items():
        assert e.name == name and re.fullmatch(r"[a-z0-9_.]+", name)
        assert e.device in pk.KNOWN_DEVICES, (name, e.device)
        assert re.fullmatch(r"[0-9a-f]{64}", e.sha256), name
        assert re.fullmatch(r"[0-9a-f]{7,40}", e.commit), name
        assert e.repository.startswith("https://github.com/") and e.path.endswith(".json.gz")
        assert e.licence in ("MIT", "BSD-3-Clause") and e.publisher and e.ran and e.software
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", e.recorded), name
    assert pt.TRACES["v100_resnet50_training"].training
    assert not pt.TRACES["h100_vit_base"].training


def test_meta_is_labelled_by_provenance_as_published():
    meta = pt.trace_meta("h100_vit_base")
    assert str(from_meta(meta)) == ("published by AMD TraceLens, measured on NVIDIA H100 80GB HBM3 "
                                    "(torch 2.6.0+cu124, 2025-07-18)")
    assert meta["device"] == "H100-SXM" and meta["source_commit"] == "171dd747"
    resnet = from_meta(pt.trace_meta("v100_resnet50_training"))
    assert resnet.kind == "published" and resnet.by == "PyTorch Kineto" and "V100" in resnet.device


def test_bad_names_are_refused_naming_what_exists():
    with pytest.raises(LookupError, match="h100_vit_base"):
        pt.published_trace("h100_vit")
    with pytest.raises(TypeError, match="name"):
        pt.published_trace(None)
    with pytest.raises(LookupError, match="known"):
        pt.trace_meta("resnet")
    with pytest.raises(LookupError):
        pt.has_trace("nope")


# ----------------------------------------------------------------------------------------- the folder
def test_root_argument_then_env(tmp_path, monkeypatch):
    assert pt.traces_root(tmp_path) == tmp_path
    monkeypatch.setenv(pt.ENV, str(tmp_path))
    assert pt.traces_root() == tmp_path


def test_a_missing_folder_says_how_to_get_the_traces(tmp_path, monkeypatch):
    monkeypatch.setenv(pt.ENV, str(tmp_path / "nowhere"))
    with pytest.raises(pt.TracesMissing, match=re.escape(pt.ENV)) as e:
        pt.traces_root()
    assert isinstance(e.value, LookupError) and "shared/reference/traces" in str(e.value)
    assert not pt.has_trace("h100_vit_base")
    assert pt.published_trace_or_none("h100_vit_base") is None
    with pytest.raises(pt.TracesMissing):
        pt.published_trace("h100_vit_base")


def test_a_missing_file_in_the_folder(tmp_path):
    assert not pt.has_trace("h100_bert_small", tmp_path)
    assert pt.published_trace_or_none("h100_bert_small", root=tmp_path) is None
    with pytest.raises(pt.TracesMissing, match=pt.TRACES["h100_bert_small"].file):
        pt.published_trace("h100_bert_small", root=tmp_path)


def test_a_file_with_other_bytes_is_refused(tmp_path):
    path = _fake(tmp_path, "h100_vit_base")
    assert pt.has_trace("h100_vit_base", tmp_path)  # there, but not trusted:
    with pytest.raises(ValueError, match="SHA-256") as e:
        pt.published_trace("h100_vit_base", root=tmp_path)
    assert str(path) in str(e.value) and "171dd747" in str(e.value)


def test_a_file_with_the_pinned_bytes_is_returned(tmp_path, monkeypatch):
    data = b"a stand-in for the trace"
    entry = pt.TRACES["h100_vit_base"]
    pinned = pt.PublishedTrace(**{**entry.__dict__, "sha256": hashlib.sha256(data).hexdigest()})
    monkeypatch.setattr(pt, "TRACES", {**pt.TRACES, "h100_vit_base": pinned})
    path = _fake(tmp_path, "h100_vit_base", data)
    assert pt.published_trace("h100_vit_base", root=tmp_path) == path


def test_the_upstream_original_of_a_sanitized_trace_is_accepted_by_its_git_blob_id(tmp_path, monkeypatch):
    """TraceLens's own file (with the environment block this project's copy drops) is recognised by the
    git blob id of the source README; git's id of "hello\\n" is ce01362…"""
    entry = pt.TRACES["h100_bert_small"]
    assert entry.blob == "737b43a1"
    monkeypatch.setattr(pt, "TRACES", {**pt.TRACES, "h100_bert_small": pt.PublishedTrace(
        **{**entry.__dict__, "blob": "ce013625030b"})})
    path = _fake(tmp_path, "h100_bert_small", b"hello\n")
    assert pt.published_trace("h100_bert_small", root=tmp_path) == path
    _fake(tmp_path, "h100_bert_small", b"hello!\n")
    with pytest.raises(ValueError, match="git blob ce013625030b"):
        pt.published_trace("h100_bert_small", root=tmp_path)


# ------------------------------------------------------------------ the shared folder (skips without it)
@needs_shared
@pytest.mark.parametrize("name", list(pt.TRACES))
def test_each_shared_trace_is_the_one_catalogued(name):
    e = pt.TRACES[name]
    path = pt.published_trace(name, root=SHARED_TRACES)  # checks the SHA-256
    with gzip.open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    gpus = set(re.findall(r'"deviceProperties"\s*:\s*\[\s*\{[^}]*?"name"\s*:\s*"([^"]+)"', text))
    assert gpus == {e.gpu}, (name, gpus)


@needs_shared
def test_the_catalogue_agrees_with_the_shared_readme():
    readme = (SHARED_TRACES / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line for line in readme.splitlines() if line.startswith("| `")}
    for name, e in pt.TRACES.items():
        assert e.file in rows, f"{e.file} is not in the shared README"
        row = rows[e.file]
        assert e.commit in row and e.licence in row, (name, row[:200])
        assert e.path.rsplit("/", 1)[-1] in row and (not e.blob or e.blob in row), (name, row[:200])
