import json

import numpy as np
import pytest

from gorila.errors import ConfigError
from gorila.metrics import RunCurve, plot_learning_curve, plot_runs, plot_speedup, read_series

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _csv(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("step,time_s,return,loss\n"
                    "100,0.5,,0.9\n"
                    "200,1.0,12.5,0.7\n"
                    "300,1.5,,0.4\n"
                    "400,2.0,30,\n")
    return path


def _assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 5_000  # axes, labels and lines, not an empty canvas


def test_read_series_skips_blank_cells(tmp_path):
    xs, ys = read_series(_csv(tmp_path), "step", "return")
    assert xs.tolist() == [200.0, 400.0] and ys.tolist() == [12.5, 30.0]
    xs, ys = read_series(_csv(tmp_path), "step", "loss")
    assert xs.tolist() == [100.0, 200.0, 300.0] and np.allclose(ys, [0.9, 0.7, 0.4])


def test_read_series_names_a_missing_column(tmp_path):
    with pytest.raises(ValueError, match="'reward'.*return"):
        read_series(_csv(tmp_path), "step", "reward")


def test_learning_curve_png(tmp_path):
    out = plot_learning_curve(_csv(tmp_path), "step", "return", tmp_path / "plots" / "return.png", "DQN")
    assert out == tmp_path / "plots" / "return.png"
    _assert_png(out)


def test_learning_curve_several_columns(tmp_path):
    _assert_png(plot_learning_curve(_csv(tmp_path), "time_s", ["return", "loss"], tmp_path / "c.png", "two"))


def test_speedup_png(tmp_path):
    out = plot_speedup([1, 2, 4], [1.0, 1.7, 2.9], tmp_path / "speedup.png", "sync", efficiency=[1.0, 0.85, 0.72])
    _assert_png(out)
    _assert_png(plot_speedup([1, 2], [1.0, 1.9], tmp_path / "plain.png", "no efficiency"))
    _assert_png(plot_speedup([1, 2], [1.0, 1.3], tmp_path / "limit.png", "limit", limit=[1.0, 1.4]))
    _assert_png(plot_speedup([1, 2], [1.0, 1.3], tmp_path / "runs.png", "runs", runs=[(1, 1.0), (2, 1.2), (2, 1.4)]))


def test_speedup_needs_matching_lengths(tmp_path):
    with pytest.raises(ValueError, match="2 worker counts, 3 speedups"):
        plot_speedup([1, 2], [1.0, 1.5, 2.0], tmp_path / "x.png", "bad")
    with pytest.raises(ValueError, match="1 efficiencies"):
        plot_speedup([1, 2], [1.0, 1.5], tmp_path / "x.png", "bad", efficiency=[1.0])
    with pytest.raises(ValueError, match="one limit per worker count"):
        plot_speedup([1, 2], [1.0, 1.5], tmp_path / "x.png", "bad", limit=[1.0])
    assert not (tmp_path / "x.png").exists()


def _run_dir(path, mode, target=475.0, unit="env steps", rows=((1000, 1.5, 20.0), (2000, 3.0, 480.0))):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"algo": "a3c", "run": {"mode": mode}, "headline": "eval_return",
                                                  "target": target, "step_unit": unit}))
    lines = ["step,time_s,env_steps,eval_return"] + [f"{s},{t},{s},{r}" for s, t, r in rows]
    (path / "metrics.csv").write_text("\n".join(lines) + "\n")
    return path


def test_learning_curve_has_a_wall_time_panel_and_the_target(tmp_path):
    out = plot_learning_curve(_csv(tmp_path), "step", ["return"], tmp_path / "lc.png", "dqn on CartPole-v1",
                              target=25.0)
    _assert_png(out)
    from PIL import Image

    width, height = Image.open(out).size
    assert width > 1.5 * height  # two panels side by side: by steps and by seconds of training


def test_run_curve_reads_the_headline_by_steps_and_by_time(tmp_path):
    curve = RunCurve.read(_run_dir(tmp_path / "sync", "sync"))
    assert curve.metric == "eval_return" and curve.target == 475.0 and curve.step_unit == "env steps"
    assert curve.steps.tolist() == [1000, 2000] and curve.seconds.tolist() == [1.5, 3.0]
    assert curve.values.tolist() == [20.0, 480.0] and "a3c sync" in curve.label


def test_runs_are_overlaid_in_one_picture(tmp_path):
    runs = [_run_dir(tmp_path / m, m) for m in ("sync", "async", "semi-async")]
    _assert_png(plot_runs(runs, tmp_path / "compare.png"))


def test_runs_that_count_steps_differently_are_refused(tmp_path):
    rl = _run_dir(tmp_path / "rl", "sync")
    lstsq = _run_dir(tmp_path / "lstsq", "sync", unit="updates")
    with pytest.raises(ConfigError, match="env steps, updates"):
        plot_runs([rl, lstsq], tmp_path / "x.png")
    with pytest.raises(ConfigError, match="not a gorila run directory"):
        plot_runs([tmp_path / "nothing"], tmp_path / "x.png")


def _eval_run(path, seed, lr=1e-3, rows=((1000, 1.5, 20.0), (2000, 3.0, 480.0))):
    """A run directory whose evaluations say where their parameters were taken, and their range."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({
        "algo": "a3c", "run": {"mode": "async", "seed": seed, "run_dir": str(path), "stamp": str(seed)},
        "a3c": {"env": "CartPole-v1", "lr": lr}, "headline": "eval_return", "target": 475.0,
        "step_unit": "env steps"}))
    lines = ["step,time_s,env_steps,eval_return,eval_min,eval_max,eval_env_steps,eval_train_time_s"]
    lines += [f"{s},{t},{s},{r},{r - 10},{r + 5},{s - 400},{t - 0.5}" for s, t, r in rows]
    (path / "metrics.csv").write_text("\n".join(lines) + "\n")
    return path


def test_an_evaluation_is_drawn_where_its_parameters_were_taken_with_its_range(tmp_path):
    curve = RunCurve.read(_eval_run(tmp_path / "r", 0))
    assert curve.steps.tolist() == [600, 1600] and curve.seconds.tolist() == [1.0, 2.5]
    assert curve.low.tolist() == [10.0, 470.0] and curve.high.tolist() == [25.0, 485.0]
    xs, ys = read_series(tmp_path / "r" / "metrics.csv", "env_steps", "eval_return")
    assert xs.tolist() == [600, 1600] and ys.tolist() == [20.0, 480.0]


def test_runs_are_named_by_algorithm_and_the_settings_that_differ_not_their_directories(tmp_path):
    from gorila.metrics.curves import name_runs

    curves = [RunCurve.read(_eval_run(tmp_path / f"dir-{k}", seed=k, lr=lr)) for k, lr in ((0, 1e-3), (1, 3e-4))]
    assert [c.label for c in name_runs(curves)] == ["a3c async, lr 0.001, seed 0", "a3c async, lr 0.0003, seed 1"]
    assert [c.label for c in name_runs(curves[:1])] == ["a3c async"]


def test_runs_of_one_setting_are_grouped_into_a_median_and_the_range_of_the_seeds(tmp_path):
    from gorila.metrics.curves import group_runs, title

    runs = [_eval_run(tmp_path / f"a-{seed}", seed, rows=((1000, 1.0, r), (2000, 2.0, r + 100)))
            for seed, r in ((0, 10.0), (1, 30.0), (2, 50.0))]
    runs.append(_eval_run(tmp_path / "b-0", 0, lr=0.01))
    curves = [RunCurve.read(r) for r in runs]
    (a, b) = group_runs(curves)
    assert (a.label, a.runs, b.label, b.runs) == ("a3c async, lr 0.001", 3, "a3c async, lr 0.01", 1)
    assert a.steps[0] == 600 and a.steps[-1] == 1600
    assert (a.median[0], a.low[0], a.high[0]) == (30.0, 10.0, 50.0)
    assert (a.median[-1], a.low[-1], a.high[-1]) == (130.0, 110.0, 150.0)
    assert title(curves[:1]) == "eval return of a3c on CartPole-v1: 1 run"
    assert title(curves, [a, b]) == ("eval return of a3c on CartPole-v1: median and range over seeds, "
                                     "2 settings, 4 runs")
    _assert_png(plot_runs(runs, tmp_path / "grouped.png", group=True))


def test_gorila_plot_groups_runs_from_the_command_line(tmp_path, capsys):
    from gorila.cli import main

    runs = [str(_eval_run(tmp_path / f"a-{seed}", seed)) for seed in (0, 1)]
    assert main(["plot", *runs, "--group", "--out", str(tmp_path / "g.png")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "g.png")
    _assert_png(tmp_path / "g.png")


def _plot(capsys, *args):
    from gorila.cli import main

    code: object
    try:
        code = main(["plot", *map(str, args)])
    except SystemExit as exit_:  # argparse's way out, as the command line sees it
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("damage, why", [
    (b"9" * (50 << 20), "not CSV: field larger than field limit"),   # one 50 MB cell
    (b"\xff\xfe\x00", "not UTF-8 text at byte"),
    (b"x", "its 'eval_return' column holds '480.0x', not a number"),
])
def test_gorila_plot_names_a_damaged_metrics_csv_not_a_flag(tmp_path, capsys, damage, why):
    run = _run_dir(tmp_path / "run", "sync")
    with open(run / "metrics.csv", "ab") as f:
        f.seek(-1, 2)
        f.truncate()  # the last row's newline: the damage joins the last cell
        f.write(damage + b"\n")
    code, err = _plot(capsys, run, "--out", tmp_path / "x.png")
    assert code == 2 and err.startswith("gorila plot: error: RUN_DIR: ") and why in err, err
    assert "--metric" not in err and not (tmp_path / "x.png").exists()


def test_gorila_plot_blames_metric_only_when_it_was_given(tmp_path, capsys):
    run = _run_dir(tmp_path / "run", "sync")
    code, err = _plot(capsys, run, "--metric", "loss", "--out", tmp_path / "x.png")
    assert code == 2 and err.startswith("gorila plot: error: --metric: ") and "no column 'loss'" in err, err
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "headline": "loss"}))  # a headline its rows lack
    code, err = _plot(capsys, run, "--out", tmp_path / "x.png")
    assert code == 2 and err.startswith("gorila plot: error: RUN_DIR: ") and "no column 'loss'" in err, err


@pytest.mark.parametrize("config", ["[1, 2]", '{"algo": ["a3c"]}', '{"algo": "a3c", "headline": 3}', "{"])
def test_gorila_plot_names_a_damaged_config_json(tmp_path, capsys, config):
    run = _run_dir(tmp_path / "run", "sync")
    (run / "config.json").write_text(config)
    code, err = _plot(capsys, run, "--out", tmp_path / "x.png")
    assert code == 2 and err.startswith("gorila plot: error: RUN_DIR: ") and "config.json" in err, err


def test_gorila_plot_names_an_out_it_cannot_write(tmp_path, capsys):
    run = _run_dir(tmp_path / "run", "sync")
    (tmp_path / "a-file").write_text("")
    code, err = _plot(capsys, run, "--out", tmp_path / "a-file" / "x.png")
    assert code == 2 and err.startswith("gorila plot: error: --out: ") and "cannot be written" in err, err
    code, err = _plot(capsys, run, "--out", tmp_path)  # a directory
    assert code == 2 and err.startswith("gorila plot: error: --out: ") and "cannot be written" in err, err
