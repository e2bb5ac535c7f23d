"""Conditions C5 and C6 of the smooth-sensitivity analysis (Appendix B.4 of 2018) at the
release's order: checked, or why the release bound is not proven there."""

from __future__ import annotations

from pate_cli.common.spelling import option, options
from pate_cli.core import conditions as cond_core
from pate_cli.core.theorem6 import NumericalRangeError
from pate_cli.errors import PateError


class ConditionError(PateError):
    """Conditions C5/C6 fail at the order used: the smooth-sensitivity bound does not hold."""


def checked_conditions(
    sigma: float, num_classes: int, order: float, strict: bool, skip_conditions: bool
) -> tuple[tuple[bool, bool] | None, list[str]]:
    """Conditions C5 and C6 (Appendix B.4) at ``order``, None where they cannot be checked,
    and the warnings they give; a ConditionError where the release bound is not proven and
    ``skip_conditions`` is off."""
    warnings: list[str] = []
    conditions: tuple[bool, bool] | None
    try:
        conditions = cond_core.check_conditions(sigma, num_classes, order, reference=not strict)
    except NumericalRangeError as exc:
        if not skip_conditions:
            raise ConditionError(
                f"{exc} (order {order:g}, sigma {sigma:g}); the release bound is not verified "
                f"there: choose another {options('order', 'sigma', joined='or')}, or pass "
                f"{option('skip-conditions')}"
            ) from exc
        conditions = None
        warnings.append(f"{exc}; computed anyway because of {option('skip-conditions')}")
    if strict and conditions == (True, False):
        # The sound bounds need only C5 (a non-decreasing per-query bound); without C6
        # they take a cell-wise bound of the increments instead of Algorithm 3's plateau.
        warnings.append(
            f"condition C6 fails at order {order:g} (sigma {sigma:g}, {num_classes} classes): "
            "the local sensitivity uses a bound that does not need it"
        )
    elif conditions is not None and not all(conditions):
        failed = " and ".join(
            name for name, ok in zip(("C5", "C6"), conditions, strict=True) if not ok
        )
        message = (
            f"condition {failed} of the smooth-sensitivity analysis fails at order {order:g} "
            f"(sigma {sigma:g}, {num_classes} classes)"
        )
        if not skip_conditions:
            raise ConditionError(
                f"{message}; the release bound is not proven there: choose another "
                f"{option('order')}, or pass {option('skip-conditions')} to compute it anyway"
            )
        warnings.append(f"{message}; computed anyway because of {option('skip-conditions')}")
    return conditions, warnings
