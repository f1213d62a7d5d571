"""Read a Kineto (Chrome trace) JSON file one event at a time, plain or gzipped, without loading it whole.

A ``torch.profiler`` trace is one JSON object whose ``traceEvents`` array holds every event; a 500 MB
trace parsed with ``json.load`` takes several GB of Python objects. :func:`read_document` walks the top
level object itself and decodes each event with the standard library's C decoder
(``JSONDecoder.raw_decode``) from a sliding buffer, hands it to a callback and forgets it, so memory
holds only what the callback keeps. The other top-level members (``deviceProperties``, ``metadata``,
``distributedInfo``, ``schemaVersion``) are small and returned whole. A bare array of events (Chrome's
"JSON Array Format") is read too.

Errors are :class:`TraceFormatError` (a ``ValueError``) naming the file: not JSON, a truncated file or
gzip stream, a document that is not a trace.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from pathlib import Path
from typing import Any, Callable, TextIO

__all__ = ["CHUNK_CHARS", "TraceFormatError", "open_text", "read_document"]

#: Characters read from the file at a time.
CHUNK_CHARS = 1 << 22

#: A value (one event) longer than this is taken for invalid JSON rather than read on.
MAX_VALUE_CHARS = 1 << 26

_WS = re.compile(r"[\s,]*")
_DECODER = json.JSONDecoder()


class TraceFormatError(ValueError):
    """A file that is not a readable Kineto / Chrome trace (the message names the file and why)."""


def open_text(path: Path) -> TextIO:
    """``path`` opened as UTF-8 text, through gzip when it starts with gzip's magic bytes."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


class _Buffer:
    """A window on the text of a file: ``text[pos:]`` is what is left to parse; :meth:`more` reads on."""

    def __init__(self, fh: TextIO, path: Path, on_bytes: Callable[[int], None] | None) -> None:
        self.fh, self.path, self.on_bytes = fh, path, on_bytes
        self.text, self.pos, self.eof = "", 0, False

    def more(self) -> bool:
        """Read the next chunk (dropping what was parsed); False at the end of the file."""
        if self.eof:
            return False
        try:
            chunk = self.fh.read(CHUNK_CHARS)
        except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt gzip stream
            raise TraceFormatError(f"{self.path}: the gzip stream is truncated or corrupt ({exc})") from None
        except UnicodeDecodeError:
            raise TraceFormatError(f"{self.path}: not a JSON trace (the file is not UTF-8 text)") from None
        if self.on_bytes is not None:
            self.on_bytes(len(chunk))
        self.text, self.pos = self.text[self.pos:] + chunk, 0
        self.eof = not chunk
        return bool(chunk)

    def skip(self) -> str:
        """Skip whitespace and commas; the next character ('' at the end of the file)."""
        while True:
            self.pos = _WS.match(self.text, self.pos).end()
            if self.pos < len(self.text) or not self.more():
                return self.text[self.pos:self.pos + 1]

    def expect(self, char: str, what: str) -> None:
        if self.skip() != char:
            found = self.text[self.pos:self.pos + 20] or "the end of the file"
            raise TraceFormatError(f"{self.path}: not a Kineto/Chrome JSON trace: expected {what}, found {found!r}")
        self.pos += 1

    def value(self) -> Any:
        """Decode the next JSON value, reading on until it is complete."""
        self.skip()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.text) - self.pos < MAX_VALUE_CHARS and self.more():
                    continue  # the value runs past what was read: read on
                truncated = self.eof and (exc.pos >= len(self.text.rstrip()) - 1 or exc.msg.startswith("Unterminated"))
                if truncated:
                    raise TraceFormatError(f"{self.path}: the JSON ends early (a truncated trace: {exc.msg})") from None
                raise TraceFormatError(f"{self.path}: not valid JSON ({exc.msg})") from None
            self.pos = end
            return obj


def read_document(path: str | os.PathLike, on_event: Callable[[dict], None],
                  on_bytes: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Stream ``path``'s ``traceEvents`` to ``on_event`` one dict at a time; return the other top-level members.

    ``on_bytes(n)`` is called with the characters of each chunk read (a progress bar). Raises
    :class:`TraceFormatError` for a file that is not a JSON trace, is truncated, or has no ``traceEvents``.
    """
    path = Path(path)
    with open_text(path) as fh:
        buf = _Buffer(fh, path, on_bytes)
        first = buf.skip()
        if first == "[":  # Chrome's JSON Array Format: the events alone
            buf.pos += 1
            _events(buf, on_event)
            return {"traceEvents": True}
        buf.expect("{", "a JSON object with a traceEvents array")
        top: dict[str, Any] = {}
        while True:
            if buf.skip() == "}":
                break
            key = buf.value()
            if not isinstance(key, str):
                raise TraceFormatError(f"{path}: not a Kineto/Chrome JSON trace: expected a member name")
            buf.expect(":", f"':' after {key!r}")
            if key == "traceEvents":
                buf.expect("[", "the traceEvents array")
                _events(buf, on_event)
                top[key] = True
            else:
                top[key] = buf.value()
    if "traceEvents" not in top:
        raise TraceFormatError(f"{path}: a JSON object without traceEvents: not a Kineto/Chrome trace")
    return top


def _events(buf: _Buffer, on_event: Callable[[dict], None]) -> None:
    while True:
        char = buf.skip()
        if char == "]":
            buf.pos += 1
            return
        if not char:
            raise TraceFormatError(f"{buf.path}: the JSON ends early inside traceEvents (a truncated trace)")
        event = buf.value()
        if isinstance(event, dict):
            on_event(event)
