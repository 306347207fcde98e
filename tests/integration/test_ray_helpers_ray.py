"""The embedded Ray of ``gorila train`` never starts the helpers a run does not use (the
autoscaler monitor, the dashboard's head, and the log monitor unless ``--verbose``), and runs
work without them. Should a Ray version start them some other way, this fails."""

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

# The helpers' scripts, by a part of their command lines.
HELPERS = ("autoscaler/_private/monitor.py", "dashboard/dashboard.py", "_private/log_monitor.py")


def test_the_embedded_ray_runs_without_them(ray_local):
    lines = [" ".join(child.cmdline()) for child in psutil.Process().children()]
    assert any("gcs_server" in line for line in lines)  # the embedded Ray's own children
    assert any("raylet" in line for line in lines)
    assert not [line for line in lines if any(helper in line for helper in HELPERS)]
    assert ray_local.get(ray_local.remote(lambda: 7).remote(), timeout=60) == 7
