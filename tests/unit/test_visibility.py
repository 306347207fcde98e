"""What a run tells about where it runs (issue 32, item 9)."""

from gorila.config import RunConfig
from gorila.driver.stages import runtime_stage


def test_the_stage_line_names_the_cluster_that_ray_address_points_at(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.7:6379")
    assert runtime_stage(RunConfig(runtime="ray")) == "joining the Ray cluster at 10.0.0.7:6379 (from RAY_ADDRESS)"
    assert runtime_stage(RunConfig(runtime="ray", address="10.0.0.8:6379")) == \
        "joining the Ray cluster at 10.0.0.8:6379"  # the flag wins, as it does when Ray is joined
    monkeypatch.delenv("RAY_ADDRESS")
    assert runtime_stage(RunConfig(runtime="ray")).startswith("starting Ray on this machine")


def test_address_local_names_this_machines_embedded_ray_even_where_ray_address_is_set(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.7:6379")  # the flag wins over it, as for any address
    assert runtime_stage(RunConfig(runtime="ray", address="local")).startswith("starting Ray on this machine")
