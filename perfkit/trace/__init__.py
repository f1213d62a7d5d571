"""Read your own profile: a ``torch.profiler`` trace, every kernel joined to its op, diagnosed in the book's terms.

- :func:`read_trace` (``pk.read_trace``): the trace's GPU kernels, copies and memsets, one row each, joined to
  the op that launched them (:mod:`.join`), its layer, pass and profiler step;
- :func:`diagnose_trace` (``pk.diagnose_trace``): a :class:`TraceReport`. ``report.ops``, one row per op
  instance: its shapes, FLOPs and bytes counted as the advisor counts them (:mod:`.opmap`), measured kernel
  time, achieved FLOP/s and bytes/s, perfkit's predicted time for that shape on the trace's GPU, the rule
  that explains the gap and the fix, priced (:mod:`.price`); ``report.steps`` and ``report.summary``, each
  step's time by class, GPU idle, launch-bound stretches and MFU; ``report.top(n)``, the time sinks.
- ``python -m perfkit trace FILE [--spec NAME] [--csv OUT] [--top N]`` prints it.

The file streams (:mod:`.stream`): a 500 MB trace is read without holding it. perfkit reads the Kineto
JSON itself rather than through HTA (Holistic Trace Analysis): HTA pulls about a hundred packages
(Jupyter among them) and rounds kernel times to whole microseconds by default, and loading a whole trace
into a frame is what made its memory grow with the trace (HTA issue #250).
"""

from .join import KERNEL_COLUMNS
from .opmap import MAPPED, Work, work_of
from .price import TRACE_RULES
from .read import NoGpuKernels, UnknownTraceDevice, read_trace
from .report import diagnose_trace
from .result import OP_COLUMNS, STEP_COLUMNS, TraceReport
from .stream import TraceFormatError

__all__ = ["KERNEL_COLUMNS", "MAPPED", "NoGpuKernels", "OP_COLUMNS", "STEP_COLUMNS", "TRACE_RULES",
           "TraceFormatError", "TraceReport", "UnknownTraceDevice", "Work", "diagnose_trace", "read_trace",
           "work_of"]
