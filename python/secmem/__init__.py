"""secmem: secure-processor memory protection, executed and timed.

Every scheme encrypts, authenticates and verifies real bytes in a simulated untrusted
memory; the same operations are timed by a cycle-level model of the processor.

    >>> import secmem
    >>> r = secmem.run(workload="stream", integrity="chash", encryption="otp", instructions=1_000_000)
    >>> r.stats["ipc"]
    >>> mem = secmem.SecureMemory(size="64MiB", integrity="chash", encryption="otp")
    >>> df = secmem.sweep({"workload": ["stream", "chase"], "l2.size": ["256KiB", "1MiB"]})
"""

from . import _early

_early.install()  # first: the imports below take a moment (the CLI's process only)

from typing import TYPE_CHECKING, Any

from ._core import ConfigError, IntegrityError, __version__, set_trace_reading, trace_reading
from .api import Interrupted, Result, SecureMemory, Untrusted, export, presets, run, workloads
from .results import StoreError
from .sweep import sweep
from .traces import TraceError, open_trace

if TYPE_CHECKING:
    from .comparison import compare
    from .plotting import plot
    from .saved import load_result

# compare, plot and load_result build pandas DataFrames: pandas (half a second to import) is loaded
# when one of them is first asked for, not by every `import secmem` (PEP 562).
def __getattr__(name: str) -> Any:
    if name == "compare":
        from .comparison import compare

        return compare
    if name == "plot":
        from .plotting import plot

        return plot
    if name == "load_result":
        from .saved import load_result

        return load_result
    raise AttributeError(f"module 'secmem' has no attribute {name!r}")


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
    "plot",
    "presets",
    "run",
    "set_trace_reading",
    "sweep",
    "trace_reading",
    "workloads",
]
