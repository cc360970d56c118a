"""Peak resident memory of this process, as the benchmarks report it.

`ru_maxrss` is not a process's own figure: a process started by `subprocess` (vfork + exec on
Linux) inherits its parent's peak (a parent that generated a 10,240 px scene made its children
report 9 GB), and a process that generated its own test data counts that too. Linux keeps the
high-water mark of the process's own memory as `VmHWM` in /proc/self/status, and writing 5 to
/proc/self/clear_refs resets it to the current RSS: `reset_peak()` just before the work measured
and `peak_rss_mb()` after it give the peak during that work (counting what was resident when it
started). Elsewhere both fall back to `ru_maxrss`.
"""

from __future__ import annotations

import resource
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak() -> None:
    """Start the peak from the current RSS (Linux; elsewhere nothing happens)."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        pass


def peak_rss_mb() -> float:
    """This process's peak RSS in MiB since it started or since `reset_peak()`."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
