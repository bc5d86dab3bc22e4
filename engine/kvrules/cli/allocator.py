"""The C allocator settings of a ``kvrules`` process (glibc only; elsewhere nothing changes).

A worker builds a cell's columns and decoded files (megabytes of C arrays from ``malloc``)
and frees them all before the next cell. With glibc's defaults the freed top of the heap is
given back to the kernel at once, and the next cell faults the same pages in again, zeroed:
measured on a 200-cell campaign, 93,000 page faults and a tenth of the CPU time. Kept for
reuse (and with large blocks served from the heap too), 24,000 faults, with peak RSS
unchanged: one cell's data at a time. Set before any worker or engine process is forked,
so they inherit it. The library leaves the allocator of its host process alone.
"""
from __future__ import annotations

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""``mallopt`` parameter numbers (glibc ``malloc.h``)."""

MMAP_THRESHOLD = 64 * 1024 * 1024
"""Blocks below this come from the heap (a rank file is a few MiB at most)."""
TRIM_THRESHOLD = 256 * 1024 * 1024
"""Free memory at the heap's top kept for reuse, up to this much."""


def keep_freed_memory() -> bool:
    """Reuse freed large blocks instead of returning them to the kernel; True when set."""
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to load, or not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
