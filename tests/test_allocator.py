"""The CLI process keeps freed large blocks for reuse: glibc otherwise maps a
fresh zeroed block for every file read and decoded, and pays its size in page faults."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

CHURN = """
import resource, sys
from kvrules.cli.allocator import keep_freed_memory
if sys.argv[1] == "kept" and not keep_freed_memory():
    print("unsupported")
    raise SystemExit
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):  # a cell's columns (8 KiB arrays from malloc, 16 MiB), then freed
    columns = [[0] * 1000 for _ in range(2000)]
    del columns
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(platform.system() != "Linux", reason="page-fault counts of glibc Linux")
def test_freed_blocks_are_reused_instead_of_mapped_again() -> None:
    kept = _faults("kept")
    if kept == "unsupported":
        pytest.skip("C library without mallopt (not glibc)")
    default = int(_faults("default"))
    assert default > 10 * 4096  # the freed heap top is trimmed, and faults in again
    assert int(kept) * 10 < default
