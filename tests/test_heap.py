"""The process the ``cycle`` command owns returns freed memory to the system.

glibc's allocator raises its mmap and trim thresholds each time a large block is freed,
so a run that once freed a big buffer keeps later ones on its heap, resident after they
die; ``heap.own`` fixes the thresholds. Each side runs in a fresh interpreter, since the
thresholds are the process's.
"""

import subprocess
import sys

import pytest

PROBE = """
import sys
from cycle import heap

def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

if sys.argv[1] == "owned":
    heap.own()
big = bytearray(8 * 2**20)  # one large buffer freed: the thresholds rise to its size
del big
before = resident_mb()
blocks = [bytearray(512 * 1024) for _ in range(40)]  # 20 MB of batch-sized buffers
last = blocks[-1]  # one stays alive above the rest, as a run's live data does
del blocks
print(resident_mb() - before)
"""


def kept_mb(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True)
    return float(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_an_owned_process_returns_the_buffers_it_frees():
    assert kept_mb("owned") < 3  # 0.5 MB here: the one buffer still alive
    # the same pattern in a process cycle does not own keeps all 20 MB: the probe shows
    # what own() changes
    assert kept_mb("library") > 15


READ_PROBE = """
import ctypes, socket, sys
from cycle import heap

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "owned":
    heap.own()
a, b = socket.socketpair()
a.sendall(b"x" * 2000)  # an answer's worth
before = libc.mallinfo2().hblks
data = b.recv(256 * 1024)  # asyncio's read: a 256 KB buffer, shrunk to what arrived
print(libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_an_owned_process_reads_a_socket_without_a_mapping_per_read():
    def mappings(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", READ_PROBE, mode], capture_output=True,
                             text=True, check=True)
        return int(out.stdout)

    # at glibc's default threshold (128 KB) the read's buffer is a mapping of its own: an
    # mmap, an mremap and a munmap for every answer a run reads
    assert mappings("library") == 1
    assert mappings("owned") == 0
