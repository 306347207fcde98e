"""``gorila simulate --check``: two small recorded runs, each predicted from its own settings on
the (hand-made) calibrated machine, beside what it measured, with the error; a run the model cannot
describe is refused with exit 2, naming it."""

import json
import shutil

import pytest

from gorila.cli import main
from gorila.sim.calibration import Calibration, Workload

pytestmark = pytest.mark.smoke

# The calibration's lstsq problem (gorila simulate --calibrate measures it with these settings).
PROBLEM = ["--n", "25000", "--d", "400", "--condition", "100"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A synchronous and an asynchronous lstsq run of 2 workers, and a calibration of their workload."""
    root = tmp_path_factory.mktemp("check")
    runs = []
    for mode in ("sync", "async"):
        run_dir = root / f"lstsq-{mode}"
        assert main(["train", "--algo", "lstsq", "--runtime", "local", "--mode", mode, "--workers", "2", *PROBLEM,
                     "--iterations", "40", "--run-dir", str(run_dir)]) == 0
        runs.append(run_dir)
    work = Workload(algo="lstsq", params=400, optimizer="sgd", env_steps_per_gradient=25_000, divides_data=True,
                    pipelined=False, compute_s={1: (0.004, 0.0045), 2: (0.003, 0.0032)})
    calibration = Calibration(cpus=2, transport="shm", latency_s=1e-4, bandwidth_Bps=1e9,
                              apply_points={"sgd": [[400, 2e-5]]}, workloads={"lstsq": work})
    return runs, calibration.save(root / "calibration.json")


def test_each_run_is_predicted_from_its_settings_beside_what_it_measured(recorded, tmp_path, capsys):
    runs, calibration = recorded
    out = tmp_path / "out"
    assert main(["simulate", "--calibration", str(calibration), "--check", *map(str, runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert all(run.name in printed for run in runs)
    checks = json.loads((out / "check.json").read_text())["runs"]
    assert [c["mode"] for c in checks] == ["sync", "async"] and all(c["workers"] == 2 for c in checks)
    for check, run in zip(checks, runs):
        summary = json.loads((run / "summary.json").read_text())
        assert check["measured_updates_per_s"] == pytest.approx(summary["updates_per_s"])
        assert check["predicted_updates_per_s"] > 0
        assert check["updates_error"] == pytest.approx(
            (check["predicted_updates_per_s"] - check["measured_updates_per_s"]) / check["measured_updates_per_s"])
    sync, _ = checks
    # the barrier: every push of the run and of the model is on the newest version
    assert sync["measured_staleness_mean"] == sync["predicted_staleness_mean"] == sync["staleness_error"] == 0


def test_a_run_the_model_cannot_describe_is_refused_naming_it(recorded, tmp_path, capsys):
    runs, calibration = recorded
    unfinished = tmp_path / "unfinished"
    shutil.copytree(runs[0], unfinished)
    (unfinished / "summary.json").unlink()
    assert main(["simulate", "--calibration", str(calibration), "--check", str(unfinished)]) == 2
    assert "summary.json" in capsys.readouterr().err
    other = tmp_path / "other"
    assert main(["train", "--algo", "lstsq", "--runtime", "local", "--workers", "2", "--iterations", "5",
                 "--run-dir", str(other)]) == 0  # the default problem: 100 parameters, not the calibrated 400
    capsys.readouterr()
    assert main(["simulate", "--calibration", str(calibration), "--check", str(other)]) == 2
    assert "parameters" in capsys.readouterr().err
