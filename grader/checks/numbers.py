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
    _, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return len(fraction) if len(fraction) <= 6 else None


def half_unit(value: float) -> float:
    """Half a unit of the last decimal a number shows (0.005 for 7.99): how far from its value it may have been
    rounded; 0 for a number with no short form."""
    decimals = shown_decimals(value)
    return 0.5 * 10.0**-decimals * (1 + 1e-9) if decimals is not None else 0.0


def agrees(reported: Any, actual: float, rel_tolerance: float = 1e-3, coarsest: float | None = None) -> bool:
    """Whether ``reported`` is ``actual`` within ``rel_tolerance``, or to the precision it is shown with; ``coarsest``
    (relative) is the roughest rounding accepted (a loss shown as 2.0 says too little to be judged right)."""
    if not is_number(reported) or not math.isfinite(float(actual)):
        return False
    reported = float(reported)
    if math.isclose(reported, actual, rel_tol=rel_tolerance, abs_tol=1e-12):
        return True
    rounding = half_unit(reported)
    decimals = shown_decimals(reported)
    if decimals is None:
        return False
    # (At the coarsest precision itself, 0.05 s shown to two decimals against a 10 % coarsest, is fine enough.)
    if coarsest is not None and rounding > coarsest * abs(reported) * (1 + 1e-6):
        # A float drops a rounding's trailing zeros (1.80 reads 1.8): it may be ``actual`` rounded at a precision fine
        # enough, whose last decimals are zeros.
        finer = [d for d in range(decimals + 1, decimals + 8) if 0.5 * 10.0**-d <= coarsest * abs(reported)]
        return any(math.isclose(round(actual, d), reported, rel_tol=1e-12, abs_tol=1e-12) for d in finer)
    return abs(reported - actual) <= rounding
