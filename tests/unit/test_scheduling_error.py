"""What a user reads when processes are not up in time: no room in the cluster, or a slow start."""

from gorila.errors import SchedulingError


def test_no_room_says_to_use_fewer_workers_or_a_bigger_cluster():
    message = str(SchedulingError.not_started("3 actors", 60.0, asks=1.0, free=0.5, total=2.0))
    assert message.startswith("3 actors could not be placed within 60 s")
    assert "0.50 of 2.0 CPUs free" in message and "fewer workers or a bigger cluster" in message


def test_room_enough_says_the_start_was_slow_rather_than_unplaceable():
    message = str(SchedulingError.not_started("1 parameter shards", 60.0, asks=0.28, free=0.32, total=2.0))
    assert message.startswith("1 parameter shards did not start within 60 s, though there is room for them")
    assert "could not be placed" not in message and "fewer workers" not in message
