"""A run directory is data on Ray too: resuming one whose workers' snapshot holds a pickled payload
trains from its parameters and runs none of the payload (a Ray run never reads a snapshot)."""

import pytest

import gorila


@pytest.mark.heavy
def test_a_ray_resume_of_a_run_directory_whose_snapshot_holds_code_runs_none_of_it(tampered_run):
    run_dir, marker = tampered_run
    summary = gorila.train(resume=run_dir, runtime="ray", total_steps=800, time_limit_s=20)
    assert summary["env_steps"] >= 800
    assert not marker.exists()
