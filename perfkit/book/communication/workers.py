"""The processes of ``collective_sizes``: one per rank, started and stopped by :class:`Ranks` in the
parent, each running :func:`run_rank`. Every collective is ``torch.distributed``'s (gloo or NCCL); the
only other channel is a ``multiprocessing`` queue that carries results back to the parent.

**Start.** Ranks are started by ``multiprocessing``'s ``forkserver`` (``spawn`` where there is none):
each is a fresh process that never shares the parent's threads or its CUDA context, as both
``torch.distributed`` and CUDA require. The fork server is started once per Python session with
torch already imported (:data:`PRELOAD`), so a rank starts in a fraction of a second instead of the
seconds ``import torch`` takes. A rank runs this file by path (``runpy``, its arguments in
``RANK_ARGS``), not as ``perfkit.book.communication.workers``: it needs only the standard library and
torch, not perfkit, pandas and the chapter that importing the package would bring. The ranks meet
through a file store in a temporary folder (no port to pick); each uses one thread.

**Protocol** (rank → parent, tuples on the queue): ``("at", rank, step)`` when a rank reaches a step
(−1: the rendezvous, ``i``: the i-th point); ``("samples", i, times, k)`` from rank 0 when point ``i`` is
measured: the slowest rank's seconds per call in each sample of ``k`` calls; ``("failed", rank, error,
traceback)`` when a rank raises; ``("done", rank)`` at the end.

**Stop.** The parent waits until an overall deadline for each point's samples; a rank that fails,
dies or falls behind past the deadline raises ``RuntimeError`` naming it, and every rank is then
terminated (SIGTERM, then SIGKILL) and joined: no rank outlives the call, whatever ends it.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import os
import queue as queue_module
import runpy
import sys
import tempfile
import time
import traceback
from typing import Any

__all__ = ["MAX_CALLS", "PRELOAD", "Ranks", "SAMPLES", "run_rank"]

#: Imported once by the fork server, before it starts any rank.
PRELOAD = ["torch", "torch.distributed"]
_RANK = "__perfkit_rank__"  # the module name a rank runs this file as
#: Words of the errors a rank raises when another rank is gone: consequences, reported after the causes.
_SECONDARY = ("by peer", "remote worker", "Broken pipe", "Connection refused")
_POLL_S = 0.1  # how often the parent looks at the ranks while it waits
_ROW_GRACE_S = 2.0  # after a failure, how long the parent still waits for a point measured before it
_GRACE_S = 0.5  # after a first failure, how long the parent waits for the other ranks' reports
_EXIT_S = 5.0  # how long ranks that finished get to leave before they are terminated
#: The ranks' own timeout (torch.distributed's, on every collective) is the parent's plus this: the parent
#: judges first, naming the rank that hangs; theirs only ends ranks whose parent has gone.
_RANK_TIMEOUT_EXTRA_S = 30.0
#: Samples per point, and the most back-to-back calls one sample times.
SAMPLES, MAX_CALLS = 10, 1000


def _context() -> multiprocessing.context.BaseContext:
    """The forkserver context (torch preloaded; see the module), or spawn where forkserver does not exist."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # used when the server starts: the first run of the session
    return ctx


class Ranks:
    """``n_ranks`` processes measuring ``config["points"]``, started by the first :meth:`samples` call.

    ``config``: ``backend``, ``points`` (``[(op, nbytes), ...]``), ``dtype``, ``budget_s`` (seconds of
    timed calls per point), ``fault`` (tests only: ``(rank, "raise" | "hang" | "exit", point)`` or None).
    ``timeout_s`` bounds the whole run, from the start of the first rank.
    """

    def __init__(self, n_ranks: int, config: dict[str, Any], timeout_s: float, what: str = "collective_sizes"):
        self.n, self.config, self.timeout_s, self.what = n_ranks, dict(config), timeout_s, what
        self.processes: list[Any] = []
        self.at = {r: None for r in range(n_ranks)}  # the last step each rank reported (None: not started)
        self.samples_by_point: dict[int, tuple[list[float], int]] = {}
        self.failures: list[tuple[int, str, str]] = []
        self.queue: Any = None
        self.folder: tempfile.TemporaryDirectory | None = None
        self.deadline = math.inf

    def start(self) -> None:
        ctx = _context()
        self.folder = tempfile.TemporaryDirectory(prefix="perfkit-collectives-")
        self.queue = ctx.Queue()
        config = {**self.config, "n_ranks": self.n, "store": os.path.join(self.folder.name, "store"),
                  "timeout_s": self.timeout_s + _RANK_TIMEOUT_EXTRA_S}
        self.deadline = time.monotonic() + self.timeout_s
        for rank in range(self.n):
            p = ctx.Process(target=runpy.run_path, args=(__file__,), name=f"{self.what} rank {rank}", daemon=True,
                            kwargs={"init_globals": {"RANK_ARGS": (rank, config, self.queue)}, "run_name": _RANK})
            p.start()
            self.processes.append(p)

    def samples(self, index: int) -> tuple[list[float], int]:
        """Point ``index``'s samples (seconds per call, slowest rank) and the calls each sample timed,
        waiting for them until the deadline."""
        if not self.processes:
            self.start()
        while index not in self.samples_by_point:
            self._receive(min(_POLL_S, max(0.0, self.deadline - time.monotonic())))
            if index in self.samples_by_point:  # measured before anything failed: kept
                break
            if self.failures or self._dead():
                self._settle(index)
                if index in self.samples_by_point:
                    break
                self._fail()
            if time.monotonic() >= self.deadline:
                raise RuntimeError(self._late())
        return self.samples_by_point.pop(index)

    def _receive(self, wait: float) -> None:
        """Read what the ranks sent, waiting at most ``wait`` seconds for the first message."""
        try:
            message = self.queue.get(timeout=wait) if wait > 0 else self.queue.get_nowait()
        except queue_module.Empty:
            return
        while True:
            kind = message[0]
            if kind == "at":
                self.at[message[1]] = message[2]
            elif kind == "samples":
                self.samples_by_point[message[1]] = (message[2], message[3])
            elif kind == "failed":
                self.failures.append(message[1:])
            try:
                message = self.queue.get_nowait()
            except queue_module.Empty:
                return

    def _settle(self, index: int) -> None:
        """After a failure, point ``index`` may still be on its way from rank 0 (a rank leaves a gloo reduce
        before its root does, and can fail first): wait for it at most :data:`_ROW_GRACE_S` seconds."""
        end = time.monotonic() + _ROW_GRACE_S
        while index not in self.samples_by_point and time.monotonic() < end:
            self._receive(_POLL_S)

    def _dead(self) -> list[tuple[int, int]]:
        """(rank, exit code) of the ranks that ended without success."""
        return [(r, p.exitcode) for r, p in enumerate(self.processes) if p.exitcode not in (None, 0)]

    def _fail(self) -> None:
        """Raise ``RuntimeError`` naming the failed ranks: those that died without a word first (the likely
        cause: the others then fail to reach them), then the reports, in the order they came."""
        end = time.monotonic() + _GRACE_S
        while time.monotonic() < end:  # the other ranks' reports, and exits, arrive a little later
            self._receive(_POLL_S)
        self.failures.sort(key=lambda f: any(s in f[1] for s in _SECONDARY))  # causes first, stable
        reported = {rank for rank, _, _ in self.failures}
        silent = [(r, code) for r, code in self._dead() if r not in reported]
        parts = [f"rank {r} died ({_exit(code)}) without reporting an error" for r, code in silent]
        script = getattr(sys.modules["__main__"], "__file__", None)
        if script and silent and silent[-1][1] == 1 and not self.failures:  # exit code 1: a Python error
            parts[-1] += (" (its error is on stderr; in a script, start the ranks under "
                          "`if __name__ == \"__main__\":`, as each rank imports the script)")
        parts += [f"rank {rank} failed: {error}" for rank, error, _ in self.failures]
        message = f"{self.what}: " + "; then ".join(parts)
        if self.failures:
            rank, _, trace = self.failures[0]
            message += f"\n\nrank {rank}'s traceback:\n{trace}"
        raise RuntimeError(message)

    def _late(self) -> str:
        """Why the deadline passed: the ranks behind the others, or the step where they all stopped."""
        def step(s: Any) -> str:
            if s is None:
                return "not started"
            if s < 0:
                return "joining the group"
            op, nbytes = self.config["points"][s]
            return f"point {s + 1} of {len(self.config['points'])} ({op}, {nbytes} bytes)"

        order = {r: -2 if s is None else s for r, s in self.at.items()}
        lowest = min(order.values())
        behind = [r for r, s in order.items() if s == lowest]
        ahead = [r for r in order if r not in behind]
        names = f"rank{'s' if len(behind) > 1 else ''} {', '.join(map(str, behind))}"
        if ahead:
            why = (f"{names} {'are' if len(behind) > 1 else 'is'} behind (last report: {step(self.at[behind[0]])}), "
                   + ", ".join(f"rank {r} reached {step(self.at[r])}" for r in ahead))
        elif lowest == -2:
            why = "no rank started (the processes did not start in time)"
        else:
            why = f"{names} all reached {step(self.at[behind[0]])} and none finished it"
        return (f"{self.what}: no result within timeout_s={self.timeout_s:g} s: {why}; every rank was stopped. "
                "If the machine is only slow, give a larger timeout_s.")

    def close(self, *, finished: bool = False) -> None:
        """Stop every rank and join it (``finished``: give them :data:`_EXIT_S` to leave on their own first)."""
        try:
            end = time.monotonic() + (_EXIT_S if finished else 0.0)
            for p in self.processes:
                p.join(timeout=max(0.0, end - time.monotonic()))
        finally:
            for p in self.processes:
                if p.is_alive():
                    p.terminate()
            for p in self.processes:
                p.join(timeout=1.0)
                if p.is_alive():
                    p.kill()
                    p.join()
            if self.queue is not None:
                self.queue.close()
                self.queue.cancel_join_thread()
            if self.folder is not None:
                self.folder.cleanup()


def _exit(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


# ------------------------------------------------------------------------------------------------
# One rank (runs in its own process).


def run_rank(rank: int, config: dict[str, Any], queue: Any) -> None:
    """Rank ``rank``: join the group, time every point, report to the parent; a raised error is
    reported with its traceback and the process exits with code 1."""
    try:
        _measure(rank, config, queue)
    except KeyboardInterrupt:  # ^C in a terminal reaches every rank: the parent stops them
        sys.exit(1)
    except BaseException as e:  # noqa: BLE001 — every failure is reported to the parent
        queue.put(("failed", rank, f"{type(e).__name__}: {e}".strip(), traceback.format_exc()))
        queue.close()
        queue.join_thread()
        sys.exit(1)


def _fault(config: dict[str, Any], rank: int, index: int) -> None:
    """The failure a test asked for (``config["fault"]``), at point ``index`` of rank ``rank``."""
    fault = config.get("fault")
    if not fault or fault[0] != rank or fault[2] != index:
        return
    if fault[1] == "raise":
        raise RuntimeError(f"an injected failure at point {index + 1} (a test's fault)")
    if fault[1] == "exit":
        os._exit(3)
    time.sleep(3600)  # "hang"


def _measure(rank: int, config: dict[str, Any], queue: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    nccl = config["backend"] == "nccl"
    if nccl:
        torch.cuda.set_device(rank)
    queue.put(("at", rank, -1))
    _fault(config, rank, -1)
    dist.init_process_group(config["backend"], init_method=f"file://{config['store']}", rank=rank,
                            world_size=config["n_ranks"], timeout=datetime.timedelta(seconds=config["timeout_s"]))
    for index, (op, nbytes) in enumerate(config["points"]):
        _fault(config, rank, index)
        queue.put(("at", rank, index))
        times, calls = _time_point(op, nbytes, config, rank, dist, torch)
        if rank == 0:
            queue.put(("samples", index, times, calls))
    dist.destroy_process_group()  # after an error, not: the rank reports first, then its exit closes the links
    queue.put(("done", rank))


def _time_point(op: str, nbytes: int, config: dict[str, Any], rank: int, dist: Any,
                torch: Any) -> tuple[list[float], int]:
    """(seconds per call in each sample on the slowest rank (rank 0 gets them, the others []), k): after a
    warm-up, :data:`SAMPLES` samples of ``k`` back-to-back calls, each sample after a barrier, ``k`` chosen
    (the same on every rank) so that the samples fill ``budget_s``. Timing ``k`` calls together spreads
    over them the few microseconds by which the ranks leave a barrier apart (nccl-tests times loops too)."""
    nccl, n = config["backend"] == "nccl", config["n_ranks"]
    device = torch.device("cuda", rank) if nccl else torch.device("cpu")
    dtype = getattr(torch, config["dtype"])
    elements = nbytes // torch.tensor([], dtype=dtype).element_size()
    if op == "all-reduce":
        buffer = torch.zeros(elements, dtype=dtype, device=device)  # sums of zeros stay zero: no overflow

        def call():
            dist.all_reduce(buffer)
    else:
        out = torch.empty(elements, dtype=dtype, device=device)
        part = torch.zeros(elements // n, dtype=dtype, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def call():
            gather(out, part)

    sync = torch.cuda.synchronize if nccl else (lambda: None)

    def timed(calls: int) -> float:
        dist.barrier(device_ids=[rank]) if nccl else dist.barrier()
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        return (time.perf_counter() - start) / calls

    call()  # warm-up: connections, buffers
    first = torch.tensor([max(timed(1), timed(1))], dtype=torch.float64, device=device)
    dist.all_reduce(first, op=dist.ReduceOp.MAX)  # every rank computes the same k from the same number
    k = int(min(MAX_CALLS, max(1, config["budget_s"] / SAMPLES // float(first))))
    times = torch.tensor([timed(k) for _ in range(SAMPLES)], dtype=torch.float64, device=device)
    dist.reduce(times, dst=0, op=dist.ReduceOp.MAX)  # a call ends when its slowest rank is done
    return times.tolist() if rank == 0 else [], k


if __name__ == _RANK:  # a rank, started by Ranks.start: runpy gave it RANK_ARGS
    run_rank(*RANK_ARGS)  # noqa: F821
