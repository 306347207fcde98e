"""SIGINT and SIGTERM during a run: abort at once while it starts, stop after the chunk once it trains."""

import os
import signal

import pytest

from gorila.driver.stop import Interrupted, StopSignals


def test_while_starting_a_signal_aborts_at_once():
    with StopSignals(), pytest.raises(Interrupted) as stopped:
        os.kill(os.getpid(), signal.SIGTERM)
    assert stopped.value.exit_code == 143 and stopped.value.summary is None
    assert isinstance(stopped.value, KeyboardInterrupt)


def test_once_armed_the_first_signal_asks_and_the_second_aborts():
    with StopSignals() as signals:
        signals.arm()
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.received == signal.SIGINT  # the loop stops after its chunk
        with pytest.raises(Interrupted) as stopped:
            os.kill(os.getpid(), signal.SIGINT)
    assert stopped.value.exit_code == 130


def test_the_handlers_before_are_put_back_even_if_something_replaced_them():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with StopSignals() as signals:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as starting Ray does
        signals.install()
        assert signal.getsignal(signal.SIGTERM) == signals._handle
    assert {s: signal.getsignal(s) for s in before} == before
