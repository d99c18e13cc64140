"""This process's identity for per-process gauge series, and their move
to the child's own series after fork().

A per-process gauge series carries a "pid" label whose value is
"<pid>:<start>", the start time in clock ticks since boot
(/proc/<pid>/stat), so that a recycled pid is never taken for the
process that wrote the series.  Readers show only the pid.
"""
from __future__ import annotations

import os
import weakref
from typing import Dict, Optional

_label: Optional[str] = None
# Bound per-process gauges (metrics without labels, and children), moved
# to the new process's series after fork.
_per_process: "weakref.WeakSet" = weakref.WeakSet()


def start_ticks(pid: int) -> Optional[int]:
    """The start time of @pid in clock ticks since boot, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields start
    # after the last ')'.  starttime is field 22; the rest starts at 3.
    try:
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def pid_label() -> str:
    """This process's "<pid>:<start>"."""
    global _label
    if _label is None:
        pid = os.getpid()
        _label = f"{pid}:{start_ticks(pid) or 0}"
    return _label


def split_pid(value: str) -> str:
    """The pid part of a pid label's value."""
    return value.split(":", 1)[0]


def alive(value: str, cache: Optional[Dict[str, bool]] = None) -> bool:
    """Whether the process of a pid label's value still runs (the same
    process: same pid and same start time)."""
    if cache is not None and value in cache:
        return cache[value]
    pid_s, _, ticks_s = value.partition(":")
    result = False
    try:
        pid = int(pid_s)
        ticks = start_ticks(pid)
        result = ticks is not None and (not ticks_s or ticks == int(ticks_s))
    except ValueError:
        result = False
    if cache is not None:
        cache[value] = result
    return result


def track(metric: object) -> None:
    _per_process.add(metric)


def _after_fork_in_child() -> None:
    global _label
    _label = None
    for metric in list(_per_process):
        metric._rebind_process()  # type: ignore[attr-defined]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
