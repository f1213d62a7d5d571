"""perfkit's version, in one place (read by ``pyproject.toml``, the recorder and ``perfkit info``)."""

__version__ = "0.1.0"
