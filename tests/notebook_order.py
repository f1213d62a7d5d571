"""pytest-xdist, ``--dist loadfile``: the chapter notebooks first, the book's tests after them.

Part of the one-execution-per-chapter design of :mod:`notebook_cache` (its docstring, "Order"): the
book build of tests/book/test_book.py reuses what nbval executed, so it must start after every
chapter notebook has run. :func:`make_scheduler` returns a ``LoadFileScheduling`` that queues the
notebooks first, longest first (by the seconds the last run saved, else by cell count), and holds
the book's test file back until every notebook is done, allowing for xdist's one-item look-ahead (a
worker runs the last item it was given only once it is given another or told to shut down).
"""

from __future__ import annotations

#: The test file that builds the book (its tests run after every notebook).
BOOK_TESTS = "tests/book/test_book.py"



def _is_notebook_scope(scope: str) -> bool:
    return scope.endswith(".ipynb")


def make_scheduler(config, log, durations: dict[str, float]):
    from xdist.scheduler import LoadFileScheduling

    class NotebooksFirstScheduling(LoadFileScheduling):
        """``--dist loadfile``, with the chapter notebooks first (longest first) and
        tests/book/test_book.py held back until every notebook is done (see the module's doc)."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.held: tuple[str, dict[str, bool]] | None = None
            self.notebook_scopes: set[str] = set()
            self.seconds: dict[str, float] = {}

        # -- the queue
        def schedule(self) -> None:
            assert self.collection_is_completed
            if self.collection is not None:
                for node in self.nodes:
                    self._reschedule(node)
                return
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            self.collection = list(next(iter(self.registered_collections.values())))
            if not self.collection:
                return
            units: dict[str, dict[str, bool]] = {}
            for nodeid in self.collection:
                units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
            notebooks = [s for s in units if _is_notebook_scope(s)]
            self.notebook_scopes = set(notebooks)
            known = all(s in durations for s in notebooks)
            notebooks.sort(key=lambda s: -(durations[s] if known else len(units[s])))
            book = BOOK_TESTS if BOOK_TESTS in units else None
            # Without notebooks the build executes every chapter itself: the longest unit, first.
            order = notebooks + ([book] if book and not notebooks else [])
            order += [s for s in units if s not in order and s != book]
            for scope in order:
                self.workqueue[scope] = units[scope]
            if book and notebooks:
                self.held = (book, units[book])

            extra = len(self.nodes) - (len(self.workqueue) + (self.held is not None))
            for _ in range(max(0, extra)):
                unused, _assigned = self.assigned_work.popitem()
                self.log(f"Shutting down unused node {unused}")
                unused.shutdown()
            for node in self.nodes:
                if self.workqueue:
                    self._assign_work_unit(node)
            for node in self.nodes:
                self._reschedule(node)
            if not self.workqueue and self.held is None:
                for node in self.nodes:
                    node.shutdown()

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            self._release_if_ready()
            if not self.workqueue:
                if self.held is None:
                    node.shutdown()
                # else: keep the node, the held file may come to it
                return
            if self._pending_of(self.assigned_work[node]) > 2:
                return
            self._assign_work_unit(node)

        def _release_if_ready(self) -> None:
            if self.held is None or any(_is_notebook_scope(s) for s in self.workqueue):
                return
            for workload in self.assigned_work.values():
                pending = self._pending_of(workload)
                for scope, unit in workload.items():
                    if scope not in self.notebook_scopes:
                        continue
                    left = list(unit.values()).count(False)
                    # left == pending == 1: the worker's last item, which xdist runs only once the
                    # worker gets more work or is shut down
                    if left and not (left == 1 and pending == 1):
                        return
            scope, unit = self.held
            self.held = None
            self.workqueue[scope] = unit
            self.workqueue.move_to_end(scope, last=False)
            self.log(f"every notebook is done: {scope} released")
            for node in sorted(self.nodes, key=lambda n: self._pending_of(self.assigned_work[n])):
                self._reschedule(node)

        # -- the session's end waits for the held file
        @property
        def tests_finished(self) -> bool:
            return self.held is None and super().tests_finished

        @property
        def has_pending(self) -> bool:
            return self.held is not None or super().has_pending

        def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
            scope = self._split_scope(self.registered_collections[node][item_index])
            if scope in self.notebook_scopes:
                self.seconds[scope] = self.seconds.get(scope, 0.0) + duration
            super().mark_test_complete(node, item_index, duration)

    return NotebooksFirstScheduling(config, log)
