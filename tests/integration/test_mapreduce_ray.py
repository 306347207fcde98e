"""gorila.mapreduce on Ray: the sharded mean and variance example, each shard in a Ray process,
gives what the local runtime gives."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def moments(runtime):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "sharded_moments.py"), "--runtime", runtime,
                          "--shards", "2", "--rows", "800", "--columns", "2", "--seed", "5"],
                         capture_output=True, text=True, timeout=200, env={**os.environ, "RAY_ADDRESS": ""})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout[out.stdout.index("{"):])


def test_the_example_on_ray_matches_the_local_runtime():
    local, ray = moments("local"), moments("ray")
    assert ray["rows"] == local["rows"] == 1600
    np.testing.assert_allclose(ray["mean"], local["mean"], rtol=1e-12)
    np.testing.assert_allclose(ray["variance"], local["variance"], rtol=1e-12)
