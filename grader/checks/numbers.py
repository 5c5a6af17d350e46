"""Numbers as a student shows them: a value is right at the precision it is displayed with.

A results table rounded for display (``round(memory, 1)``) holds 4.6 for 4.63 MB: right to the digit it shows. A check
that compares a reported number with what it should be accepts any difference within half a unit of the reported
number's last digit, as well as the check's own relative tolerance.
"""

from __future__ import annotations

import math
from typing import Any

from grader.kernel.values import is_number


def shown_decimals(value: float) -> int | None:
    """How many decimals a number shows (``repr``'s shortest form: 4.6 shows 1, 4.63 shows 2, 12.0 and 12 show 0);
    None for a number with no short form (not rounded: the relative tolerance alone applies)."""
    text = repr(float(value))
    if "e" in text or "inf" in text or "nan" in text:
        return None
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return len(fraction) if len(fraction) <= 6 else None


def agrees(reported: Any, actual: float, rel_tolerance: float = 1e-3) -> bool:
    """Whether ``reported`` is ``actual`` within ``rel_tolerance``, or to the precision it is shown with."""
    if not is_number(reported) or not math.isfinite(float(actual)):
        return False
    reported = float(reported)
    if math.isclose(reported, actual, rel_tol=rel_tolerance, abs_tol=1e-12):
        return True
    decimals = shown_decimals(reported)
    return decimals is not None and abs(reported - actual) <= 0.5 * 10.0**-decimals * (1 + 1e-9)
