"""The shard's finite check: exactly ``np.isfinite(x).all()``, including where squares overflow."""

import numpy as np
import pytest

from gorila.params.optim import all_finite


def test_finite_values_whose_squares_overflow_are_finite():
    huge = np.full(8, np.finfo(np.float32).max, np.float32)
    assert all_finite(huge) and all_finite(-huge) and all_finite(np.zeros(0, np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("base", ["ones", "huge"])
@pytest.mark.parametrize("at", [0, 4, 7])
def test_any_nan_or_infinity_is_caught(bad, base, at):
    x = np.ones(8, np.float32) if base == "ones" else np.full(8, 3e38, np.float32)
    x[at] = bad
    assert not all_finite(x)


def test_opposite_infinities_do_not_cancel():
    assert not all_finite(np.array([np.inf, -np.inf, 1.0], np.float32))
