"""``gorila train`` refuses bad flags before anything starts, naming the flag (exit code 2).

In-process: the parser and the configs run exactly as in the command, without starting a Python
process per case (``tests/smoke/test_cli.py`` checks the exit code of the real command).
"""

import pytest

from gorila.cli import main


def refused(capsys, argv: list[str]) -> str:
    """Run ``gorila`` with ``argv``; it must refuse with code 2. Returns what it printed on stderr."""
    code: str | int | None
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse and the pre-checks exit on their own
        code = exit_.code
    assert code == 2, argv
    return capsys.readouterr().err


@pytest.mark.parametrize("args, flag", [
    (["--algo", "lstsq", "--workers", "0"], "--workers"),
    (["--algo", "lstsq", "--workers", "9999999"], "--workers"),
    (["--algo", "lstsq", "--mode", "bogus"], "--mode"),
    (["--algo", "lstsq", "--mode", "semi-async", "--aggregate", "0"], "--aggregate"),
    (["--algo", "lstsq", "--mode", "semi-async", "--count-within", "5", "--accept-within", "3"], "--accept-within"),
    (["--algo", "lstsq", "--mode", "sync", "--max-staleness", "3"], "--max-staleness"),
    (["--algo", "lstsq", "--count-within", "1"], "--count-within"),
    (["--algo", "lstsq", "--shards", "0"], "--shards"),
    (["--algo", "lstsq", "--time-limit-s", "-1"], "--time-limit-s"),
    (["--algo", "lstsq", "--server", "workers", "--mode", "sync"], "--server"),      # replaced: process, learner
    (["--algo", "impala", "--server", "learner", "--learners", "2", "--runtime", "local"], "--learners"),
    (["--algo", "a3c", "--unroll-length", "-1"], "--unroll-length"),
    (["--algo", "a3c", "--entropy-coef", "-0.1"], "--entropy-coef"),
    (["--algo", "a3c", "--gae-lambda", "1.5"], "--gae-lambda"),
    (["--algo", "a3c", "--eval-epsilon", "2"], "--eval-epsilon"),
    (["--algo", "a3c", "--target-on", "best"], "--target-on"),
    (["--algo", "dqn", "--target-update", "hard:0"], "--target-update"),
    (["--algo", "dqn", "--target-update", "every:10"], "--target-update"),
    (["--algo", "dqn", "--target", "mean"], "--target"),
    (["--algo", "dqn", "--param-cache", "node"], "--param-cache"),                 # needs --replay global
    (["--algo", "dqn", "--replay-placement", "node"], "--replay-placement"),
    (["--algo", "apex", "--param-cache", "rack"], "--param-cache"),
    (["--algo", "ppo", "--cache-tiers", "rack"], "--cache-tiers"),
    (["--algo", "ppo", "--cache-tiers", "node,rack", "--nodes-per-rack", "2"], "--cache-tiers"),  # no cache
    (["--algo", "ppo", "--param-cache", "node", "--cache-tiers", "node,rack"], "--nodes-per-rack"),
    (["--algo", "impala", "--param-cache", "node", "--cache-tiers", "node,rack", "--nodes-per-rack", "0"],
     "--nodes-per-rack"),
    (["--algo", "apex", "--param-cache", "node", "--nodes-per-rack", "2"], "--nodes-per-rack"),  # no rack tier
    (["--algo", "apex", "--replay-placement", "rack"], "--replay-placement"),
    (["--algo", "dqn", "--replay", "local", "--actors", "2", "--learners", "3"], "--learners"),
    (["--algo", "dqn", "--mode", "sync", "--outlier-k", "3"], "--outlier-k"),
    (["--algo", "dqn", "--env", "NoSuchEnv-v0"], "--env"),
    (["--algo", "dqn", "--env", "Pendulum-v1"], "--env"),
    (["--algo", "dqn", "--resume", "/nonexistent"], "--resume"),
    (["--algo", "apex", "--inference", "remote"], "--inference"),
    (["--algo", "a3c", "--inference-batch", "0"], "--inference-batch"),
    (["--algo", "dqn", "--inference-wait-ms", "-1"], "--inference-wait-ms"),
    (["--algo", "impala", "--rho-bar", "0.5", "--c-bar", "1.0"], "--c-bar"),      # rho_bar >= c_bar
    (["--algo", "impala", "--unroll-length", "0"], "--unroll-length"),
    (["--algo", "impala", "--vtrace", "maybe"], "--vtrace"),
    (["--algo", "impala", "--max-policy-lag", "-1"], "--max-policy-lag"),
    (["--algo", "impala", "--mode", "sync", "--learners", "2"], "--learners"),          # Ray: see ImpalaLearner
    (["--algo", "ppo", "--mode", "sync", "--actors", "2", "--learners", "2"], "--learners"),
    (["--algo", "ppo", "--actors", "1", "--learners", "2", "--runtime", "local"], "--learners"),
    (["--algo", "ppo", "--clip", "0"], "--clip"),
    (["--algo", "ppo", "--log-std-init", "5"], "--log-std-init"),
    (["--algo", "a3c", "--env", "CartPole-v1", "--log-std-init", "-1"], "--log-std-init"),  # discrete actions
])
def test_invalid_flags_are_refused_naming_the_flag(capsys, args, flag):
    assert flag in refused(capsys, ["train", *args])


@pytest.mark.parametrize("algo, flag", [("dqn", "--workers"), ("lstsq", "--env"), ("lstsq", "--eval-episodes"),
                                        ("a3c", "--actors"), ("lstsq", "--device")])
def test_a_flag_the_algorithm_does_not_use_is_refused(capsys, algo, flag):
    err = refused(capsys, ["train", "--algo", algo, flag, "3"])
    assert f"{flag}: not a flag of --algo {algo}" in err


def test_the_refusal_says_which_algorithm_has_the_flag(capsys):
    assert "it is a flag of --algo a3c, lstsq" in refused(capsys, ["train", "--algo", "dqn", "--workers", "3"])


@pytest.mark.parametrize("n, d", [(10**12, 10**6), (1000, 15_000)])
def test_lstsq_sizes_that_cannot_fit_or_set_up_in_time_are_refused_naming_d(n, d):
    from gorila.envs.least_squares import LeastSquares
    from gorila.errors import ConfigError

    # 16 GiB free, 50 GFLOP/s: 7.3 TiB of moments do not fit; an SVD of 15 000 columns takes over an hour.
    with pytest.raises(ConfigError) as refused_:
        LeastSquares(n, d, 0.1, 10.0).check_size(available_bytes=16 * 2**30, flops_per_s=5e10)
    assert refused_.value.flag == "--d" and f"d={d}" in refused_.value.message


def test_lstsq_sizes_that_fit_and_set_up_in_seconds_are_accepted():
    from gorila.envs.least_squares import LeastSquares

    LeastSquares(1_000_000, 1000, 0.1, 10.0).check_size(available_bytes=16 * 2**30, flops_per_s=5e10)


@pytest.mark.parametrize("args, flag", [
    (["--run-dir", ""], "--run-dir"),
    (["--run-dir", "{file}"], "--run-dir"),
    (["--seed", str(2**64)], "--seed"),
    (["--algo", "dqn", "--env", "no_such_module:Foo-v0", "--run-dir", "{dir}"], "--env"),
    (["--algo", "dqn", "--env", "NoSuchEnv-v0", "--run-dir", "{dir}"], "--env"),  # refused before Ray starts
])
def test_run_flags_that_cannot_be_used_are_refused(capsys, tmp_path, monkeypatch, args, flag):
    import gorila.driver.loop

    def started(*args, **kwargs):
        raise AssertionError("the run started (Ray, workers) before the flags were refused")

    monkeypatch.setattr(gorila.driver.loop, "run", started)
    (tmp_path / "a-file").write_text("")
    argv = [a.format(file=tmp_path / "a-file", dir=tmp_path / "run") for a in args]
    assert flag in refused(capsys, ["train", "--algo", "lstsq", *argv])
    assert not (tmp_path / "run").exists()


def test_an_abbreviated_flag_is_refused_not_taken_for_the_flag_it_begins(capsys):
    err = refused(capsys, ["train", "--algo", "a3c", "--entropy-c", "0.1"])
    assert "--entropy-c: not a flag of --algo a3c (did you mean --entropy-coef?)" in err


def test_a_misspelt_flag_gets_the_closest_flag(capsys):
    assert "did you mean --total-steps?" in refused(capsys, ["train", "--total-timesteps", "5"])


def test_a_list_flag_says_what_it_expects(capsys):
    assert "expects comma-separated int values such as 64,64, got '64x64'" in refused(
        capsys, ["train", "--hidden", "64x64"])


def test_the_call_timeout_is_scaled_to_the_chunk_with_a_floor_unless_given():
    from gorila.config import CALL_TIMEOUT_FLOOR_S, RunConfig

    assert RunConfig().call_timeout(0.5) == CALL_TIMEOUT_FLOOR_S == 60.0  # 120 chunks of 0.5 s
    assert RunConfig().call_timeout(2.0) == 240.0
    assert RunConfig().call_timeout(None) == 60.0  # chunks of steps: the floor
    assert RunConfig(call_timeout_s=7.0).call_timeout(2.0) == 7.0


def test_a_time_limit_ends_by_the_limit_one_chunk_and_the_grace():
    from gorila.config import TIME_LIMIT_GRACE_S, RunConfig

    assert RunConfig(time_limit_s=100.0).time_limit_end(0.5) == 100.5 + TIME_LIMIT_GRACE_S
    assert RunConfig().time_limit_end(0.5) is None
