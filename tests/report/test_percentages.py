"""A share printed as a percentage never says more than it is: 1999 of 2000 cases passing
printed "100%" (the run list, the summary, the reports, the TUI), and 1 of 3000 "0%"."""

from __future__ import annotations

import pytest

from cycle.report.format import pct


@pytest.mark.parametrize(("share", "shown"), [
    (1999 / 2000, "99.95%"), (0.9996, "99.96%"), (0.99999, ">99.99%"), (1.0, "100%"),
    (1 / 3000, "0.03%"), (0.004, "0.4%"), (0.00001, "<0.01%"), (0.0, "0%"),
    (2 / 3, "67%"), (0.5, "50%"), (None, "—"),
])
def test_a_share_is_never_rounded_to_all_or_nothing(share, shown):
    assert pct(share) == shown
