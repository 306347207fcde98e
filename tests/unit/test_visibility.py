"""What a run tells about where it runs (issue 32, item 9)."""

from gorila.config import RunConfig
from gorila.driver.loop import _runtime_stage


def test_the_stage_line_names_the_cluster_that_ray_address_points_at(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.7:6379")
    assert _runtime_stage(RunConfig(runtime="ray")) == "joining the Ray cluster at 10.0.0.7:6379 (from RAY_ADDRESS)"
    assert _runtime_stage(RunConfig(runtime="ray", address="10.0.0.8:6379")) == \
        "joining the Ray cluster at 10.0.0.8:6379"  # the flag wins, as it does when Ray is joined
    monkeypatch.delenv("RAY_ADDRESS")
    assert _runtime_stage(RunConfig(runtime="ray")).startswith("starting Ray on this machine")


def test_rays_lines_about_retried_tasks_are_left_out_unless_asked_for(capsys):
    """Without --verbose, Ray's two lines about a task retried after its worker died are left out
    (the driver says which worker it restarted); Ray's other messages still show."""
    from ray._private import worker as ray_worker

    from gorila.runtime.ray_messages import show_retry_lines

    def raylet(*lines):
        ray_worker.print_to_stdstream({"lines": list(lines), "pid": "raylet", "is_err": False}, ignore_prefix=False)

    retried = ("Task WorkerProcess.run_steps failed. There are 9 retries remaining, so the task will be retried. "
               "Error: The actor is temporarily unavailable")
    died = ("A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
            "the problem, check the logs for the dead worker. Worker ID: 1f")
    try:
        show_retry_lines(False)
        raylet(died, retried, "1 Workers (tasks / actors) killed due to memory pressure (OOM)")
        out = capsys.readouterr().out
        assert "retries remaining" not in out and "A worker died" not in out and "memory pressure" in out
        show_retry_lines(True)
        raylet(retried.replace("9", "8"))
        assert "There are 8 retries remaining" in capsys.readouterr().out
    finally:
        show_retry_lines(True)
