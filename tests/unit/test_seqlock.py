"""The seqlock buffer's segment: its writer removes it on close, a segment left by a writer that
died is taken over by the next, and Python's resource tracker neither removes a segment nor
complains about one (it writes to the stderr of the process that started it)."""

import os
import subprocess
import sys
import uuid

import numpy as np

from gorila.params.seqlock import SeqlockBuffer

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
