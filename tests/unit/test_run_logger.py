import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from gorila.metrics import RunLogger
from gorila.metrics.progress import Limits, LineProgress

COLUMNS = ["return", "loss", "lag"]


def _plain() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def _logger(run_dir: Path, **kwargs) -> RunLogger:
    kwargs.setdefault("tensorboard", False)
    return RunLogger(run_dir, kwargs.pop("config", {"algo": "dqn"}), COLUMNS, **kwargs)


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_csv_header_rows_and_blank_cells(tmp_path):
    logger = _logger(tmp_path / "run")
    logger.log(100, {"loss": 0.5, "lag": 2})
    # Rows are flushed as they are logged: readable before close, as after a kill.
    assert _rows(tmp_path / "run" / "metrics.csv")[1][0] == "100"
    logger.log(200, {"return": np.float32(12.5), "loss": None, "lag": np.int64(3)})
    logger.close({})
    rows = _rows(tmp_path / "run" / "metrics.csv")
    assert rows[0] == ["step", "time_s", "return", "loss", "lag"]
    assert [r[:1] + r[2:] for r in rows[1:]] == [["100", "", "0.5", "2"], ["200", "12.5", "", "3"]]
    times = [float(r[1]) for r in rows[1:]]
    assert 0 <= times[0] <= times[1]


def test_a_row_at_the_last_rows_step_completes_it_instead_of_repeating_the_step(tmp_path):
    logger = _logger(tmp_path / "run")
    logger.log(100, {"loss": 0.5})
    logger.log(200, {"loss": 0.25, "lag": 2})
    logger.log(200, {"return": 7.0, "lag": 3})  # e.g. an evaluation in after the last chunk
    logger.log(300, {"loss": 0.125})
    logger.close({})
    rows = _rows(tmp_path / "run" / "metrics.csv")
    assert [r[:1] + r[2:] for r in rows[1:]] == [["100", "", "0.5", ""], ["200", "7.0", "0.25", "3"],
                                                 ["300", "", "0.125", ""]]


def test_unknown_keys_are_refused_by_name(tmp_path):
    logger = _logger(tmp_path)
    with pytest.raises(ValueError, match="'reward', 'x'.*return, loss, lag"):
        logger.log(1, {"loss": 1.0, "x": 1, "reward": 2})
    not_a_number: dict[str, Any] = {"loss": "high"}  # as an untyped caller might pass it
    with pytest.raises(TypeError, match="'loss'"):
        logger.log(1, not_a_number)
    logger.close({})
    assert len(_rows(tmp_path / "metrics.csv")) == 1  # header only: nothing half-logged


def test_column_names_are_checked(tmp_path):
    with pytest.raises(ValueError, match="reserved"):
        RunLogger(tmp_path, {}, ["step", "loss"], tensorboard=False)
    with pytest.raises(ValueError, match="repeat: loss"):
        RunLogger(tmp_path, {}, ["loss", "loss"], tensorboard=False)


@dataclass(frozen=True)
class _Net:
    hidden: tuple[int, ...] = (64, 64)


def test_config_json_converts_non_json_values(tmp_path):
    config = {"lr": np.float32(0.5), "max_staleness": float("inf"), "min": float("-inf"),
              "hidden": (64, 64), "seeds": np.arange(3), "out": tmp_path / "x", "net": _Net(),
              "steps": np.int64(10)}
    _logger(tmp_path / "run", config=config).close({})
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == {
        "lr": 0.5, "max_staleness": "inf", "min": "-inf", "hidden": [64, 64], "seeds": [0, 1, 2],
        "out": str(tmp_path / "x"), "net": {"hidden": [64, 64]}, "steps": 10}


def test_config_with_an_unstorable_value_names_it(tmp_path):
    with pytest.raises(TypeError, match=r"\$\.env\.make"):
        _logger(tmp_path, config={"env": {"make": object()}})


def test_summary_json_and_idempotent_close(tmp_path):
    logger = _logger(tmp_path)
    logger.log(1, {"loss": 1.0})
    path = logger.close({"final_return": np.float64(500.0), "versions": (1, 2)})
    assert path == tmp_path / "summary.json"
    summary = json.loads(path.read_text())
    assert summary == {"final_return": 500.0, "versions": [1, 2]}  # what the run says, nothing more
    assert logger.close({"other": 1}) == path
    assert json.loads(path.read_text()) == summary
    with pytest.raises(RuntimeError, match="closed"):
        logger.log(2, {"loss": 1.0})


def test_amend_adds_to_the_written_summary_and_writes_none_without_one(tmp_path):
    logger = _logger(tmp_path)
    logger.amend({"late": 1.0})  # no summary yet: nothing written
    assert not (tmp_path / "summary.json").exists()
    logger.close({"final_return": 500.0, "late": None})
    logger.amend({"late": np.float64(2.5), "stages": {"a_s": 1.0}})
    assert json.loads((tmp_path / "summary.json").read_text()) == {"final_return": 500.0, "late": 2.5,
                                                                     "stages": {"a_s": 1.0}}
    discarded = _logger(tmp_path / "other")
    discarded.discard()
    discarded.amend({"late": 1.0})
    assert not (tmp_path / "other" / "summary.json").exists()


def test_bad_summary_leaves_the_logger_open(tmp_path):
    logger = _logger(tmp_path)
    with pytest.raises(TypeError):
        logger.close({"bad": object()})
    logger.log(1, {"loss": 1.0})
    logger.close({"ok": True})
    assert json.loads((tmp_path / "summary.json").read_text())["ok"] is True


def test_context_manager_records_a_failure(tmp_path):
    with pytest.raises(RuntimeError):
        with _logger(tmp_path) as logger:
            logger.log(1, {"loss": 1.0})
            raise RuntimeError("actor crashed")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == "RuntimeError: actor crashed"


def test_resume_appends_and_checks_header(tmp_path):
    logger = _logger(tmp_path)
    logger.log(1, {"loss": 1.0})
    logger.log(2, {"loss": 0.5})
    logger.close({})
    last_time = float(_rows(tmp_path / "metrics.csv")[-1][1])
    # A run killed mid-write leaves a partial row behind.
    with open(tmp_path / "metrics.csv", "a") as f:
        f.write("3,0.9,,0.")

    with pytest.raises(FileExistsError, match="resume=True"):
        _logger(tmp_path)
    with pytest.raises(ValueError, match="header is step,time_s,return,loss,lag"):
        RunLogger(tmp_path, {}, ["return"], resume=True, tensorboard=False)

    resumed = _logger(tmp_path, resume=True)
    resumed.log(3, {"return": 7})
    resumed.close({})
    rows = _rows(tmp_path / "metrics.csv")
    assert rows[0] == ["step", "time_s", "return", "loss", "lag"]
    assert [r[0] for r in rows[1:]] == ["1", "2", "3"]
    assert rows[3][2:] == ["7", "", ""]
    assert float(rows[3][1]) >= last_time  # time_s continues across the resume


def test_resume_without_existing_csv_starts_fresh(tmp_path):
    _logger(tmp_path, resume=True).close({})
    assert _rows(tmp_path / "metrics.csv") == [["step", "time_s", "return", "loss", "lag"]]


def test_time_s_is_the_training_time_the_run_gives(tmp_path):
    logger = _logger(tmp_path)
    logger.log(1, {"loss": 1.0}, train_s=12.5)
    logger.close({})
    assert _rows(tmp_path / "metrics.csv")[1][1] == "12.500"


def _events(run_dir: Path):
    # tensorboard ships no type hints
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # type: ignore[import-untyped]

    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    return events


def test_tensorboard_scalars_are_written_under_their_tags(tmp_path):
    logger = _logger(tmp_path, tensorboard=True, tags={"return": "eval/return", "loss": "train/loss"})
    logger.log(10, {"loss": 0.5, "return": 3})
    logger.log(20, {"loss": 0.25, "lag": 1})
    logger.close({})
    events = _events(tmp_path)
    assert set(events.Tags()["scalars"]) == {"train/loss", "eval/return", "lag"}  # untagged: the column's name
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(10, 0.5), (20, 0.25)]
    assert [(e.step, e.value) for e in events.Scalars("eval/return")] == [(10, 3.0)]


def test_tensorboard_states_the_step_axis_and_the_hyperparameters(tmp_path):
    from tensorboard.plugins.hparams import plugin_data_pb2  # type: ignore[import-untyped]  # no type hints

    logger = _logger(tmp_path, tensorboard=True, tags={"return": "eval/return"}, step_axis="env steps",
                     hparams={"run.mode": "async", "dqn.lr": 0.03, "dqn.hidden": (64, 64), "run.seed": 0},
                     hparam_metrics=["eval/return"])
    logger.log(10, {"return": 3})
    logger.close({})
    events = _events(tmp_path)
    note = events.Tensors("run/step_axis/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "env steps" in note
    plugin = events.SummaryMetadata("_hparams_/session_start_info").plugin_data
    session = plugin_data_pb2.HParamsPluginData.FromString(plugin.content).session_start_info
    assert session.hparams["run.mode"].string_value == "async"
    assert session.hparams["dqn.lr"].number_value == pytest.approx(0.03)
    assert session.hparams["dqn.hidden"].string_value == "(64, 64)"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(
        events.SummaryMetadata("_hparams_/experiment").plugin_data.content).experiment
    assert [m.name.tag for m in experiment.metric_infos] == ["eval/return"]


def test_progress_goes_to_the_display_it_is_given(tmp_path):
    console, out = _plain()
    now = [0.0]
    display = LineProgress(console, Limits(1000, "steps"), description="dqn", clock=lambda: now[0])
    logger = _logger(tmp_path, display=display)
    logger.log(100, {"loss": 0.5, "return": 21})
    logger.message("eval return 500.0")
    now[0] = 1.0
    logger.log(200, {"loss": 0.25})  # within the line interval: held back until close
    logger.close({})
    assert out.getvalue().splitlines() == [
        "dqn",
        "10% 100/1,000 steps | return 21  loss 0.5",
        "eval return 500.0",
        "20% 200/1,000 steps 0:08 left | return 21  loss 0.25",  # 100 steps/s, 800 to go
    ]


def test_flagged_counts_are_shown_once_non_zero_and_warned_about_as_they_rise(tmp_path):
    """Issue 32 item 4: a count of faults (env failures, non-finite pushes) beyond the first
    columns still reaches the progress line once it is non-zero, and each rise is warned about."""
    console, out = _plain()
    now = [0.0]
    display = LineProgress(console, Limits(1000, "steps"), description="dqn", clock=lambda: now[0])
    logger = RunLogger(tmp_path, {"algo": "dqn"}, ["return", "loss", "lag", "bytes", "env_failures"],
                       tensorboard=False, display=display, flagged=("env_failures", "not_a_column"))
    logger.log(100, {"return": 21, "env_failures": 0})
    now[0] = 10.0
    logger.log(200, {"return": 22, "env_failures": 3})
    now[0] = 20.0
    logger.log(300, {"return": 23, "env_failures": 3})
    logger.close({})
    assert out.getvalue().splitlines() == [
        "dqn",
        "10% 100/1,000 steps | return 21",
        "warning: env_failures rose to 3 (+3 since the last row)",
        "20% 200/1,000 steps 1:20 left | env failures 3  return 22",  # faults first: kept when room is short
        "30% 300/1,000 steps 1:10 left | env failures 3  return 23",
    ]
    assert _rows(tmp_path / "metrics.csv")[2][-1] == "3"


def test_resume_cuts_the_rows_logged_after_the_restored_checkpoint(tmp_path):
    logger = _logger(tmp_path)
    for step in (10, 20, 30, 40):
        logger.log(step, {"loss": 1.0 / step}, train_s=step / 10)
    logger.close({})
    # the checkpoint was taken at step 20: rows 30 and 40 are work the resumed run does again
    resumed = _logger(tmp_path, resume=True, resume_at=20)
    resumed.log(25, {"loss": 0.04}, train_s=2.5)
    resumed.close({})
    assert [row[0] for row in _rows(tmp_path / "metrics.csv")[1:]] == ["10", "20", "25"]


def test_a_column_can_be_shown_at_a_step_of_its_own(tmp_path):
    logger = _logger(tmp_path, tensorboard=True, tags={"return": "eval/return", "loss": "train/loss"})
    logger.log(20, {"loss": 0.5, "return": 3}, steps={"return": 12})  # evaluated at step 12, in at 20
    logger.close({})
    events = _events(tmp_path)
    assert [(e.step, e.value) for e in events.Scalars("eval/return")] == [(12, 3.0)]
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(20, 0.5)]
    assert _rows(tmp_path / "metrics.csv")[1][0] == "20"
