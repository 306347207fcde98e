"""The CPU share each Ray process asks for: every process of a run fits on the cluster's nodes."""

import pytest

from gorila.runtime.placement import fitting_share


@pytest.mark.parametrize("cpus, processes, share", [
    ([2.0], 7, 0.28),        # one node: its CPUs divided equally, as before
    ([16.0], 4, 1.0),        # never more than one CPU
    ([0.5], 200, 0.01),      # never less than a hundredth
    ([1.0, 1.0], 7, 0.25),   # 0.28 would fit three per node, six in all: one process never placed
    ([1.0, 1.0], 6, 0.33),
    ([4.0, 1.0], 6, 0.8),    # at 0.83 (5 CPUs / 6) the big node holds four, the small one one: five
])
def test_the_share_is_the_largest_at_which_every_process_fits_on_a_node(cpus, processes, share):
    assert fitting_share(cpus, processes) == share
    hundredths = int(round(100 * share))
    assert sum(int(round(100 * c)) // hundredths for c in cpus) >= processes or share == 0.01
