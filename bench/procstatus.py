"""Memory of a process from ``/proc/<pid>/status``, for the benchmarks that report it."""

from __future__ import annotations

from pathlib import Path


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """``VmRSS`` (now) and ``VmHWM`` (the peak) of process ``pid``, in MB (a field the kernel does not
    show, as for a zombie, is left out). Not ``ru_maxrss``: Linux keeps that across ``execve``, so a
    child would report its parent's peak whenever that is higher."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM") if name in fields}
