"""secmem: secure-processor memory protection, executed and timed.

Every scheme encrypts, authenticates and verifies real bytes in a simulated untrusted
memory; the same operations are timed by a cycle-level model of the processor.

    >>> import secmem
    >>> r = secmem.run(workload="stream", integrity="chash", encryption="otp", instructions=1_000_000)
    >>> r.stats["ipc"]
    >>> mem = secmem.SecureMemory(size="64MiB", integrity="chash", encryption="otp")
    >>> df = secmem.sweep({"workload": ["stream", "chase"], "l2.size": ["256KiB", "1MiB"]})
"""

from ._core import ConfigError, IntegrityError, __version__
from .api import Interrupted, Result, SecureMemory, Untrusted, export, presets, run, workloads
from .comparison import compare
from .saved import load_result
from .results import StoreError
from .sweep import sweep
from .traces import TraceError, open_trace

__all__ = [
    "ConfigError",
    "IntegrityError",
    "Interrupted",
    "Result",
    "SecureMemory",
    "StoreError",
    "TraceError",
    "Untrusted",
    "__version__",
    "compare",
    "export",
    "load_result",
    "open_trace",
    "presets",
    "run",
    "sweep",
    "workloads",
]
