"""SIGINT, SIGTERM and SIGHUP during a run: abort at once while it starts, stop after the chunk once it
trains, give up the waits for the chunks under way at a second signal, quit at a third."""

import os
import signal

import pytest

from gorila.driver.stop import Interrupted, StopSignals


def test_while_starting_a_signal_aborts_at_once():
    with StopSignals(), pytest.raises(Interrupted) as stopped:
        os.kill(os.getpid(), signal.SIGTERM)
    assert stopped.value.exit_code == 143 and stopped.value.summary is None
    assert isinstance(stopped.value, KeyboardInterrupt)


def test_once_armed_the_first_signal_asks_the_second_hurries_and_the_third_aborts():
    with StopSignals() as signals:
        signals.arm()
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.received == signal.SIGINT and not signals.hurried  # the loop stops after its chunk
        os.kill(os.getpid(), signal.SIGINT)  # outside a wait it may give up: nothing is cut short
        assert signals.hurried
        with pytest.raises(Interrupted) as stopped:
            os.kill(os.getpid(), signal.SIGINT)
    assert stopped.value.exit_code == 130


def test_a_second_signal_gives_up_an_abandonable_wait_and_skips_the_next():
    """What a double Ctrl-C does to the run's end on Ray: the wait for the chunks under way ends,
    and the code after it (the final checkpoint, the summary) runs."""
    with StopSignals() as signals:
        signals.arm()
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.abandonable(lambda x: x + 1, 1) == 2  # a first signal gives nothing up

        def wait():
            os.kill(os.getpid(), signal.SIGTERM)  # the second comes while it waits
            raise AssertionError("the wait went on after the second signal")

        assert signals.abandonable(wait) is None and signals.hurried
        assert signals.abandonable(lambda: 1 / 0) is None  # skipped: the second signal came before it


@pytest.mark.parametrize("signum, code", [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_sighup_stops_a_run_as_sigterm_does(signum, code):
    """A closed terminal or a dropped ssh session (SIGHUP) asks the loop to stop, as SIGTERM does,
    instead of killing the driver with nothing saved; its exit code is 128 + 1."""
    with StopSignals() as signals:
        signals.arm()
        os.kill(os.getpid(), signum)
        assert signals.received == signum
    with StopSignals(), pytest.raises(Interrupted) as stopped:
        os.kill(os.getpid(), signum)
    assert stopped.value.exit_code == code


def test_the_handlers_before_are_put_back_even_if_something_replaced_them():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with StopSignals() as signals:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as starting Ray does
        signals.install()
        assert signal.getsignal(signal.SIGTERM) == signals._handle
    assert {s: signal.getsignal(s) for s in before} == before
