"""The age of the parameters a read got (gorila bench menger): versions and seconds behind the
learner, from the learner's publication times and each read's time and version."""

import numpy as np

from gorila.bench.menger.age import parameter_age


def test_a_read_is_behind_by_the_versions_made_since_and_the_time_since_the_next_one_was():
    published = [(10.0, 4), (11.0, 5), (12.0, 6)]
    read_at = np.array([10.5, 11.5, 12.5, 12.5, 9.0])
    versions = np.array([4, 4, 6, 5, 4])
    behind, seconds = parameter_age(published, read_at, versions)
    assert behind.tolist() == [0, 1, 0, 1, 0]
    # version 4 read at 11.5: version 5 came at 11.0; version 5 read at 12.5: version 6 came at 12.0
    np.testing.assert_allclose(seconds, [0.0, 0.5, 0.0, 0.5, 0.0])


def test_a_read_of_a_version_the_learner_has_not_heard_back_about_is_not_behind():
    # a cache can hold a version before the learner's push has come back with it
    behind, seconds = parameter_age([(10.0, 4)], np.array([10.2]), np.array([5]))
    assert behind.tolist() == [0] and seconds.tolist() == [0.0]
