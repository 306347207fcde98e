"""The embedded Ray of ``gorila train`` listens on 127.0.0.1 only and serves no dashboard: every
process it starts (its own and its workers) listens on loopback, and nothing on the dashboard's
port, while a task runs on it."""

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")
DASHBOARD_PORT = 8265


def test_the_embedded_ray_listens_on_loopback_only_and_serves_no_dashboard(ray_local):
    assert ray_local.get(ray_local.remote(lambda: 7).remote(), timeout=60) == 7  # a worker is up too
    lines, listening = [], []
    for process in psutil.Process().children(recursive=True):
        try:
            lines.append(" ".join(process.cmdline()))
            listening += [c.laddr for c in process.net_connections("inet") if c.status == psutil.CONN_LISTEN]
        except psutil.NoSuchProcess:
            continue
    assert any("gcs_server" in line for line in lines) and any("raylet" in line for line in lines), lines
    assert listening, "nothing listens: nothing was checked"
    assert all(addr.ip in LOOPBACK for addr in listening), listening
    assert DASHBOARD_PORT not in {addr.port for addr in listening}
