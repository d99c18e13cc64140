"""The move of per-process gauges to the child's own series after
fork().

A per-process gauge of the format (2.6) has one series per process:
libtally adds its label pid and judges whether that process still runs,
so a child that inherited a bound gauge binds it again, to its own.
"""
from __future__ import annotations

import os
import weakref

# Bound per-process gauges (metrics without labels, and children), moved
# to the new process's series after fork.
_per_process: "weakref.WeakSet" = weakref.WeakSet()


def track(metric: object) -> None:
    _per_process.add(metric)


def _after_fork_in_child() -> None:
    for metric in list(_per_process):
        metric._rebind_process()  # type: ignore[attr-defined]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
