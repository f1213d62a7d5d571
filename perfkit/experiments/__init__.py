"""The experiment machinery: register an experiment, run it or load its recording, record it.

- :mod:`~perfkit.experiments.registry`: :func:`~perfkit.experiments.registry.register` (an
  experiment's declared columns and needs, checked on every call), ``REGISTRY`` and ``get`` (read
  through a catalog of name → module, given by the layer above with ``use_catalog``: the book's is
  ``perfkit.book.chapters.EXPERIMENTS``), ``missing_needs``;
- :mod:`~perfkit.experiments.measure`: what experiment modules share (devices, sweeps, rows);
- :mod:`~perfkit.experiments.run`: ``run_or_load``, live where this machine can, else the recording;
- :mod:`~perfkit.experiments.record`: the recorder that writes experiments' frames to ``data/``.

It sits between the edge (``perfkit.data``, ``perfkit.provenance``) and the book, and never imports
the book: the experiments themselves live in the chapter folders of :mod:`perfkit.book`.
"""
