"""Renyi orders: the default grid (four orders below 2, then the 2018 reference's list) and
the ``--orders`` parser."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.common.spelling import given
from pate_cli.errors import UsageError

# The 2018 reference's list, exactly (REFERENCE_ORDERS): 2, 2.5, ..., 100.5 then 100 ... 500
# on a log scale. It is not sorted and 100.0 appears twice; argmin keeps the first.
# concatenate(arange(2, 100 + 1, .5), logspace(log10(100), log10(500), 100)) as the 2018
# reference computed it, its log part written out: the last bit of np.logspace depends on the
# CPU's SIMD path.
# fmt: off
_LOG_ORDERS = (
    100.0, 101.63898118064394, 103.30482495439303, 104.99797159409269, 106.71886858857785,
    108.46797076094077, 110.24574038873908, 112.05264732617208, 113.88916912826149,
    115.75579117706543, 117.65300680996316, 119.58131745004017, 121.54123273861255,
    123.53327066992105, 125.55795772803499, 127.6158290259985, 129.70742844725734,
    131.83330878940524, 133.9940319102838, 136.19016887647953, 138.4223001142522,
    140.69101556293944, 142.99691483087284, 145.34060735385242, 147.72271255621567,
    150.14386001454895, 152.60468962407978, 155.1058517677987, 157.6480074883504,
    160.23182866274476, 162.85799817992879, 165.52721012127128, 168.24016994400404,
    170.99759466766963, 173.80021306362673, 176.64876584765864, 179.5440058757417,
    182.48669834301936, 185.4776209860401, 188.5175642883074, 191.6073316892013, 194.7477397963213,
    197.93961860131265, 201.18381169922654, 204.481176511479, 207.83258451246166,
    211.23892145986682, 214.70108762878948, 218.2199980496632, 221.79658275009896,
    225.43178700068444, 229.12657156481524, 232.8819129526172, 236.69880367903446,
    240.57825252614316, 244.52128480976896, 248.52894265046982, 252.6022852489644,
    256.7423891660717, 260.9503486072392, 265.2272757117369, 269.5743008465869, 273.99257290531517,
    278.48325961159543, 283.0475478278736, 287.6866438690466, 292.40177382128667,
    297.19418386608663, 302.0651406096204, 307.01593141749777, 312.04786475500924,
    317.1622705329454, 322.3605004590837, 327.64392839543774, 333.0139507213615, 338.4719867026038,
    344.01947886641113, 349.6578933827813, 355.38872045196115, 361.21347469830044,
    367.13369557055563, 373.15094774876, 379.2668215577567, 385.4829333875148, 391.80092612033076,
    398.22246956503204, 404.7492608982984, 411.38302511321695, 418.1255154751867,
    424.97851398529554, 431.9438318512952, 439.02330996629024, 446.2188193952783,
    453.53226186965844, 460.9655702898514, 468.5207092361501, 476.19967548795006, 484.0044985514856,
    491.937241196215, 499.99999999999994,
)
# fmt: on
# 2, 2.5, ..., 100.5 are exact in binary floating point, as arange computes them.
REFERENCE_ORDERS: NDArray[np.float64] = np.concatenate([np.arange(2, 100 + 1, 0.5), _LOG_ORDERS])
REFERENCE_ORDERS.flags.writeable = False

# Orders below 2, where the reference's list stops: a long run's best order lies there (the
# conversion's log(1/delta) / (order - 1) weighs less than the composed RDP, which grows
# with the number of queries). Every bound of pate holds at every order above 1: Prop. 8
# and the exact threshold step at any order, Theorem 6 at the orders up to mu1 (Prop. 10;
# ``core.gnmax.rdp_gnmax`` keeps Prop. 8 elsewhere), Theorem 3 of 2017 for any moment
# l = order - 1 >= 0, Theorem 23 (GNSS) for 1 < order < 1/(2 beta). The smallest stays
# above 1.01, below which the improved conversion is infinite (dp_accounting's convention).
LOW_ORDERS: NDArray[np.float64] = np.array([1.1, 1.25, 1.5, 1.75])
LOW_ORDERS.flags.writeable = False

# The default grid: the low orders, then the reference's list exactly (its per-order figures
# are the reference's, at indices shifted by the number of low orders).
DEFAULT_ORDERS: NDArray[np.float64] = np.concatenate([LOW_ORDERS, REFERENCE_ORDERS])
DEFAULT_ORDERS.flags.writeable = False  # shared by every caller; parse_orders hands out copies

_MAX_ORDERS = 100_000


def parse_orders(text: str | None) -> NDArray[np.float64]:
    """Parse ``--orders``: ``None`` (the default grid), ``a,b,c`` or ``start:stop:step``.

    ``start:stop:step`` has ``numpy.arange`` semantics (stop excluded, float
    steps allowed). Every order must be finite and greater than 1.
    """
    if text is None:
        return DEFAULT_ORDERS.copy()
    spec = text.strip()
    try:
        if ":" in spec:
            parts = [float(p) for p in spec.split(":")]
            if len(parts) != 3:
                raise ValueError
            start, stop, step = parts
            if not np.isfinite(parts).all() or step <= 0:
                raise UsageError(
                    f"{given('orders', text, quote=True)}: start:stop:step needs finite numbers "
                    "and a positive step"
                )
            if (stop - start) / step > _MAX_ORDERS:
                raise UsageError(
                    f"{given('orders', text, quote=True)}: more than {_MAX_ORDERS} orders"
                )
            orders = np.arange(start, stop, step, dtype=np.float64)
        else:
            orders = np.array([float(p) for p in spec.split(",") if p.strip()], dtype=np.float64)
    except ValueError:
        raise UsageError(
            f"{given('orders', text, quote=True)}: expected a comma list such as 2,4,8 "
            "or start:stop:step such as 2:64:0.5"
        ) from None
    return _checked(orders, given("orders", text, quote=True))


def as_orders(orders: str | ArrayLike | None) -> NDArray[np.float64]:
    """Orders from the command line's text (``parse_orders``) or from an array of orders."""
    if orders is None or isinstance(orders, str):
        return parse_orders(orders)
    return _checked(np.array(orders, dtype=np.float64).reshape(-1), "orders")


def fixed_order(orders: str | ArrayLike | None, releases: object = True) -> float | None:
    """The order of a release that ``orders`` fixes in advance: its one order; None where
    there are several (the release's order is then the analysis' best, chosen on the votes)
    or no release is made (``releases`` false: no release mode, or data-independent bounds)."""
    grid = as_orders(orders) if releases else None
    return float(grid[0]) if grid is not None and grid.size == 1 else None


def _checked(orders: NDArray[np.float64], what: str) -> NDArray[np.float64]:
    if orders.size == 0:
        raise UsageError(f"{what}: the list of orders is empty")
    if not np.all(np.isfinite(orders)) or np.any(orders <= 1):
        raise UsageError(f"{what}: every Renyi order must be finite and greater than 1")
    return orders
