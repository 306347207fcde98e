"""What a run shows: the limit that ends it first, progress lines and bar, start-up stages."""

import io
import re
import time

import pytest
from rich.console import Console

from gorila.metrics.progress import LINE_INTERVAL_S, LINE_WIDTH, Limits, LineProgress, LiveProgress, NoProgress
from gorila.metrics.terminal import NORMAL, QUIET, VERBOSE, Terminal


def _plain() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def test_the_step_budget_leads_when_it_ends_first():
    status = Limits(total=1000, unit="env steps", time_limit_s=60).status(step=500, train_s=10.0, rate=50.0)
    assert status.by == "env steps" and status.fraction == 0.5 and status.eta_s == pytest.approx(10.0)


def test_the_time_limit_leads_when_it_ends_first():
    # 1,000,000 steps at 2,000 per second is 500 s away; the 10 s limit comes first
    status = Limits(total=1_000_000, unit="env steps", time_limit_s=10).status(step=4_000, train_s=2.5, rate=2_000.0)
    assert status.by == "time limit" and status.fraction == pytest.approx(0.25)
    assert status.eta_s == pytest.approx(7.5)


def test_without_a_rate_the_limit_further_along_leads():
    limits = Limits(total=1000, unit="steps", time_limit_s=10)
    assert limits.status(step=100, train_s=5.0, rate=None).by == "time limit"
    assert limits.status(step=900, train_s=5.0, rate=None).by == "steps"
    assert Limits(total=None).status(step=10, train_s=1.0, rate=5.0).fraction is None


def test_a_finished_limit_reads_100_percent_and_nothing_left():
    status = Limits(total=100, unit="steps").status(step=130, train_s=3.0, rate=10.0)
    assert status.fraction == 1.0 and status.eta_s == 0.0


def test_limits_describe_what_the_time_limit_counts():
    text = Limits(total=1_000_000, unit="env steps", time_limit_s=10).describe()
    assert text == ("1,000,000 env steps or 10 s of training (start-up not counted), whichever comes first")


def test_lines_say_which_limit_the_percentage_is_of():
    console, out = _plain()
    now = [0.0]
    display = LineProgress(console, Limits(1_000_000, "env steps", time_limit_s=10), description="a3c",
                           clock=lambda: now[0])
    display.update(1_000, {"eval_return": 9.5}, train_s=1.0)
    now[0] = LINE_INTERVAL_S
    display.update(5_000, {}, train_s=1.0 + LINE_INTERVAL_S)
    display.close()
    assert out.getvalue().splitlines() == [
        "a3c",
        "10% of 10 s, 1,000 env steps 0:09 left | eval 9.5",
        "30% of 10 s, 5,000 env steps 0:07 left",
    ]


def test_line_progress_prints_at_most_once_per_interval():
    console, out = _plain()
    now = [0.0]
    display = LineProgress(console, Limits(total=None, unit="frames"), description="", clock=lambda: now[0])
    display.update(1, {})
    now[0] = LINE_INTERVAL_S / 2
    display.update(2, {"loss": 1.0})
    now[0] = LINE_INTERVAL_S
    display.update(3, {"loss": 2.0})
    display.close()
    assert out.getvalue().splitlines() == ["1 frames", "3 frames | loss 2"]


def test_live_progress_on_a_terminal():
    out = io.StringIO()
    display = LiveProgress(Console(file=out, force_terminal=True, width=160), Limits(1000, "steps"),
                           description="dqn")
    display.update(500, {"loss": 0.125, "return": 42})
    display.message("eval return 500.0")
    display.close()
    text = out.getvalue()
    assert "\x1b[" in text  # drawn with terminal control codes, not plain lines
    assert "eval return 500.0" in text
    assert "50% 500/1,000 steps | loss 0.125  return 42" in text


def test_stages_are_stamped_with_the_time_since_the_start():
    console, out = _plain()
    terminal = Terminal(NORMAL, started_at=time.time() - 2.0, console=console)  # started two seconds ago
    terminal.line("run directory: runs/x")
    with terminal.stage("starting Ray"):
        pass
    lines = out.getvalue().splitlines()
    assert lines[0] == "run directory: runs/x"
    seconds, text = lines[1].split(" s  ")
    assert text == "starting Ray" and 2.0 <= float(seconds) < 10.0


def test_the_ends_stamps_are_times_since_the_start_and_lines_only_when_verbose():
    for verbosity, shown in ((NORMAL, False), (VERBOSE, True)):
        console, out = _plain()
        terminal = Terminal(verbosity, started_at=time.time() - 2.0, console=console)
        at = terminal.stamp("runtime shut down")
        assert 2.0 <= at < 10.0
        if shown:
            seconds, text = out.getvalue().strip().split(" s  ")
            assert text == "runtime shut down" and float(seconds) == pytest.approx(at, abs=0.05)
        else:
            assert out.getvalue() == ""


def test_quiet_shows_nothing():
    console, out = _plain()
    terminal = Terminal(QUIET, console=console)
    terminal.line("run directory: runs/x")
    with terminal.stage("starting Ray"):
        pass
    display = terminal.progress(Limits(10, "steps"), description="dqn")
    assert isinstance(display, NoProgress)
    display.update(5, {"loss": 1.0})
    display.message("eval")
    display.close()
    assert out.getvalue() == ""


def test_a_resumed_runs_time_limit_counts_its_own_training():
    # 100 s of earlier lives, then 2.5 s of this one against a 10 s limit: a quarter done
    limits = Limits(total=1_000_000, unit="env steps", time_limit_s=10, time_before_s=100.0)
    status = limits.status(step=4_000, train_s=102.5, rate=2_000.0)
    assert status.by == "time limit" and status.fraction == pytest.approx(0.25) and status.eta_s == pytest.approx(7.5)
    assert "10 s more of training" in limits.describe()


#: A long run near its worst for the status line: hundreds of millions of steps, hours left, large
#: scores and counts, and two kinds of faults counted, in the order the driver's report gives them.
WORST = {"env_failures": 12, "pushes_rejected_nonfinite": 3, "eval_return": 12345.6, "train_return": -20987.25,
         "updates": 4_567_890, "env_steps": 123_456_789}


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("limits", [Limits(200_000_000, "env steps"),
                                    Limits(200_000_000, "env steps", time_limit_s=86_400)],
                         ids=["budget", "time limit"])
def test_the_status_line_fits_80_columns_at_its_worst(limits):
    console, out = _plain()
    now = [0.0]
    display = LineProgress(console, limits, description="apex ALE/SpaceInvaders-v5 semi-async",
                           clock=lambda: now[0])
    display.update(1_000, WORST, train_s=1.0)
    now[0] = 3_600.0
    display.update(123_456_789, WORST, train_s=3_600.0)
    display.close()
    lines = out.getvalue().splitlines()
    last = lines[-1]
    assert all(len(line) <= LINE_WIDTH for line in lines), lines
    assert "123.5M" in last and "env steps" in last and last.count("env steps") == 1 and "123,456,789" not in last
    assert "env failures 12" in last and "NaN pushes 3" in last
    if limits.time_limit_s is None:  # the headline fits beside them too
        assert "eval 12.3k" in last


def test_the_live_bar_fits_80_columns_at_its_worst():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200, color_system=None)  # a wide terminal too
    display = LiveProgress(console, Limits(200_000_000, "env steps"),
                           description="apex ALE/SpaceInvaders-v5 semi-async")
    display.update(1_000, WORST, train_s=1.0)
    display.update(123_456_789, WORST, train_s=3_600.0)
    display.close()
    drawn = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", part) for part in re.split(r"[\r\n]", out.getvalue())]
    rows = _rows("\n".join(drawn))
    assert all(len(row.rstrip()) <= LINE_WIDTH for row in rows), rows
    assert any("env failures 12" in row and row.count("env steps") == 1 for row in rows), rows


def test_a_value_that_does_not_fit_is_left_out_and_the_steps_are_shown_once():
    console, out = _plain()
    display = LineProgress(console, Limits(1000, "env steps"), description="")
    display.update(500, {"eval_return": 500.0, "train_return": 480.5, "updates": 250, "a_long_metric_name": 1.0,
                         "env_steps": 500, "loss": 0.01234})
    display.close()
    assert out.getvalue().splitlines() == [
        "50% 500/1,000 env steps | eval 500  train 480.5  updates 250  loss 0.01234"]
