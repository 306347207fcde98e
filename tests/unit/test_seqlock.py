"""The seqlock buffer's segment: its writer removes it on close, a segment left by a writer that
died is taken over by the next, and Python's resource tracker neither removes a segment nor
complains about one (it writes to the stderr of the process that started it)."""

import os
import subprocess
import sys
import threading
import uuid

import numpy as np

from gorila.params.seqlock import _SEQ, _VERSION, SeqlockBuffer, checksum

WRITE_AND_CLOSE = """
import sys
import numpy as np
from gorila.params.seqlock import SeqlockBuffer
name = sys.argv[1]
writer = SeqlockBuffer.create(name, 8)
reader = SeqlockBuffer.attach(name, 8)
writer.write(np.full(8, 2.0, np.float32), 3)
out = np.empty(8, np.float32)
assert reader.read(out) == 3 and (out == 2.0).all()
reader.close()
writer.close()
"""

WRITE_AND_DIE = """
import os, sys
import numpy as np
from gorila.params.seqlock import SeqlockBuffer
writer = SeqlockBuffer.create(sys.argv[1], 4)
writer.write(np.ones(4, np.float32), 7)
os._exit(0)  # as a killed cache: no close()
"""


def _segment(name: str) -> str:
    return f"/dev/shm/{name}"


def _run(script: str, name: str) -> subprocess.CompletedProcess:
    # Waits for the resource tracker too: it holds the child's stderr until it exits.
    return subprocess.run([sys.executable, "-c", script, name], capture_output=True, text=True, timeout=60)


def test_a_closed_writer_leaves_no_segment_and_the_resource_tracker_says_nothing():
    name = f"gorila-test-{uuid.uuid4().hex[:8]}"
    done = _run(WRITE_AND_CLOSE, name)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no KeyError of an unregister too many, no "leaked shared_memory"
    assert not os.path.exists(_segment(name))


def test_a_segment_left_by_a_writer_that_died_is_taken_over_by_a_larger_one():
    name = f"gorila-test-{uuid.uuid4().hex[:8]}"
    died = _run(WRITE_AND_DIE, name)
    try:
        assert died.returncode == 0 and died.stderr == "", died.stderr
        assert os.path.exists(_segment(name))  # the tracker left it for the next writer
        writer = SeqlockBuffer.create(name, 1024)  # too small for this one: made anew under the name
        reader = SeqlockBuffer.attach(name, 1024)
        assert writer.version == -1
        writer.write(np.arange(1024, dtype=np.float32), 1)
        out = np.empty(1024, np.float32)
        assert reader.read(out) == 1 and out[-1] == 1023
        reader.close()
        writer.close()
        assert not os.path.exists(_segment(name))
    finally:
        if os.path.exists(_segment(name)):
            os.unlink(_segment(name))


class ReorderedWriter(SeqlockBuffer):
    """A writer as a CPU that keeps no store order (aarch64) may show it to a reader: the header
    of a write (its version, checksum and an even counter) visible before the vector, which then
    arrives slice by slice."""

    def write(self, flat, version):
        self._head[_VERSION] = version
        self._check[0] = checksum(flat, version)
        self._head[_SEQ] += 2
        for part in np.array_split(np.arange(self.size), 100):
            self._data[part] = flat[part]


def test_a_copy_that_mixes_two_writes_is_never_kept_whatever_order_the_stores_show_in():
    """Each write fills the vector with its version; a reader reads while it is under way, the
    counter saying it is done. Every copy read must be one write's, with that write's version:
    without the checksum the reader keeps the half-written ones."""
    size = 200_000
    name = f"gorila-test-{uuid.uuid4().hex[:8]}"
    owner = SeqlockBuffer.create(name, size)
    writer = ReorderedWriter(owner.shm, size, owner=False)
    go, stop = threading.Event(), threading.Event()

    def write_on_cue(writer):
        for version in range(1, 1_000):
            if not go.wait(timeout=30) or stop.is_set():
                return
            go.clear()
            writer.write(np.full(size, version, np.float32), version)

    thread = threading.Thread(target=write_on_cue, args=(writer,))
    thread.start()
    out = np.empty(size, np.float32)
    try:
        for _ in range(50):
            go.set()  # the next write starts while the reader reads
            version = owner.read(out)
            assert out.min() == out.max() == max(version, 0), f"a copy of {np.unique(out)} kept as version {version}"
    finally:
        stop.set()
        go.set()
        thread.join(timeout=30)
        del writer
        owner.close()


class WriterThatDies(SeqlockBuffer):
    """A writer killed in the middle of a write: the counter left odd, for good."""

    def write(self, flat, version):
        self._head[_SEQ] += 1


def test_a_reader_gives_up_on_a_writer_that_died_mid_write_rather_than_wait_for_ever():
    owner = SeqlockBuffer.create(f"gorila-test-{uuid.uuid4().hex[:8]}", 8)
    dying = WriterThatDies(owner.shm, 8, owner=False)
    try:
        owner.write(np.ones(8, np.float32), 4)
        dying.write(np.zeros(8, np.float32), 5)
        out = np.empty(8, np.float32)
        assert owner.read(out, timeout_s=0.2) == -1  # as for nothing written: the cache's reader asks the server
    finally:
        del dying
        owner.close()
