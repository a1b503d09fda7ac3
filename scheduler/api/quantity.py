"""Kubernetes resource quantities (`resource.Quantity`), parsed exactly.

Why our own parser: quantities arrive as strings from every object we watch (pod requests, node
allocatable, device capacity, selector values) and must be compared exactly as the apiserver does.
Floats would turn `0.1` CPU into 99 millicores; `Fraction` keeps every suffix exact. Like upstream's
`Value()`/`MilliValue()` of a pod's summed requests, the scheduler rounds up once, for the total
(`scheduler.core.resources.pod_requests`), never per container.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from scheduler.quoted import quoted

__all__ = ["Amount", "QuantityError", "exact", "parse_quantity", "format_alike", "format_quantity"]

# An exact amount: an int when the quantity is whole (fast arithmetic in the scheduling loop),
# a Fraction otherwise. Both compare and add exactly with each other.
Amount = int | Fraction


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
# Upstream caps quantities far below this; the cap keeps absurd input from costing memory or time.
_MAX_EXPONENT = 60
_MAX_LENGTH = 64


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity such as `100m`, `16Gi`, `1.5`, `2e3` into an exact number.

    Integers from YAML/JSON are accepted as-is (the apiserver serialises them as strings, but
    hand-written event files often carry bare numbers). Strings are cached: a cluster repeats a
    few hundred distinct quantities millions of times, once per watch event of every pod.
    """
    if isinstance(value, str):
        return _parse_string(value)
    return _parse(value)


@functools.lru_cache(maxsize=8192)
def _parse_string(value: str) -> Fraction:
    return _parse(value)


def _parse(value: str | int | float) -> Fraction:
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or number, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity must be finite, got {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string or number, got {type(value).__name__}")
    text = value.strip()
    if not text or len(text) > _MAX_LENGTH:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {quoted(value)}")
    match = _NUMBER.match(text)
    if match is None:
        raise QuantityError(f"{quoted(value)} is not a valid quantity")
    number = Fraction(match.group(1))
    suffix = match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent is not None:
        power = int(exponent.group(1))
        if abs(power) > _MAX_EXPONENT:
            raise QuantityError(f"{quoted(value)}: exponent out of range")
        return number * Fraction(10) ** power
    raise QuantityError(f"{quoted(value)} has an unknown suffix {quoted(suffix)}")


def exact(quantity: Fraction) -> Amount:
    """The same number as an int when it is whole."""
    return quantity.numerator if quantity.denominator == 1 else quantity


def format_quantity(quantity: Amount) -> str:
    """A short canonical string (binary suffix when exact, else decimal) for messages and annotations."""
    return format_alike(quantity)[0]


def format_alike(*quantities: Amount) -> tuple[str, ...]:
    """`quantities` as `format_quantity` writes one, but in one binary suffix, the largest all of
    them (zeros aside) are whole multiples of: `19360Mi/32768Mi`, not `19360Mi/32Gi`, where a
    reader compares them (a GPU's slices in use and its capacity); exact, as the API's quantities.
    One that is not whole is written alone (`format_quantity`'s decimal form)."""
    wholes = [int(q) for q in quantities if isinstance(q, int) or q.denominator == 1]
    suffix = next((suffix for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
                   if any(wholes) and all(whole % _BINARY[suffix] == 0 for whole in wholes)), "")
    return tuple(_written(quantity, suffix) for quantity in quantities)


def _written(quantity: Amount, suffix: str) -> str:
    """One quantity in `suffix` when it is whole (a zero as `0`), else in milli or nano units."""
    if isinstance(quantity, int) or quantity.denominator == 1:
        whole = int(quantity)
        return f"{whole // _BINARY[suffix]}{suffix}" if whole and suffix else str(whole)
    milli = quantity * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    nano = quantity * 10**9
    return f"{math.ceil(nano)}n"


def go_quantity(amount: Fraction, binary: bool) -> str:
    """Go's `Quantity.String()`: in a binary suffix (BinarySI) when whole and at least 1Ki, plain
    when no binary suffix divides it; else the largest decimal suffix whose mantissa is whole (4000
    is 4k, 1.5 is 1500m), finer than nano rounded up to it."""
    if not amount:
        return "0"
    if binary and amount.denominator == 1 and abs(amount) >= 1024:
        whole = amount.numerator
        return next((f"{whole // _BINARY[suffix]}{suffix}" for suffix in reversed(_BINARY)
                     if whole % _BINARY[suffix] == 0), str(whole))
    for suffix in reversed(_DECIMAL):
        scaled = amount / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(amount * 10**9)}n"
