"""A quantity a tenant wrote is quoted into QuantityError as every other tenant value is
(`scheduler.quoted.quoted`): Go's %q, cut past QUOTE_LIMIT characters. Before, the message held
the repr of the whole value: a PodGroup's `minResources: {nvidia.com/gpu: <200 KiB>}` repeated it
into every notice and log line, in Python's quoting rather than upstream's."""

from __future__ import annotations

import pytest

from scheduler.api.quantity import QuantityError, parse_quantity
from scheduler.quoted import QUOTE_LIMIT


@pytest.mark.parametrize(("value", "said"), [
    ("abc", '"abc" is not a valid quantity'),
    ("1Qi", '"1Qi" has an unknown suffix "Qi"'),
    ("1e99", '"1e99": exponent out of range'),
    ("1\tx", '"1\\tx" has an unknown suffix "\\tx"'),
    ("it's", '"it\'s" is not a valid quantity'),
    (True, "quantity must be a string or number, got True"),
    (float("nan"), "quantity must be finite, got nan"),
])
def test_a_short_value_is_quoted_as_gos_percent_q(value: str | float, said: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(value)
    assert str(caught.value) == said


def test_a_huge_value_is_cut_to_the_quote_limit() -> None:
    value = "9" * 204800
    with pytest.raises(QuantityError) as caught:
        parse_quantity(value)
    message = str(caught.value)
    assert len(message) < 2 * QUOTE_LIMIT, len(message)
    assert message.endswith(f'"{"9" * QUOTE_LIMIT}…" (204800 bytes)')
