"""The embedded Ray of ``gorila train`` runs without the helpers a run never uses (the autoscaler
monitor, and the log monitor unless ``--verbose``)."""

import psutil
import pytest

from gorila.runtime.ray_runtime import AUTOSCALER_MONITOR, LOG_MONITOR

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_the_embedded_ray_runs_without_them(ray_local):
    lines = [" ".join(child.cmdline()) for child in psutil.Process().children()]
    assert any("gcs_server" in line for line in lines)  # the embedded Ray's own children
    assert not [line for line in lines if AUTOSCALER_MONITOR in line or LOG_MONITOR in line]
    assert ray_local.get(ray_local.remote(lambda: 7).remote(), timeout=60) == 7
