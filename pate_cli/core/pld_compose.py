"""The composition of pessimistic privacy-loss distributions by one FFT product, and the
epsilon of the result (``pate_cli.core.pld``'s last step).

The run's privacy-loss distribution is the convolution of its queries': c = IFFT(prod_g
F_g^k_g) on a window of N = 2^m losses. Nothing is left out unaccounted: the mass beyond
the window is bounded by Chernoff's inequality and charged to delta, the mass below it
wraps onto higher losses (only raising delta), and every rounding of the transforms, the
powers and the sums is bounded a posteriori (``_entry_error``) and charged to delta on
every loss above epsilon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_U = 2.0**-53  # the unit roundoff of a double
# A computed bound is moved up by this much of itself (its few roundings).
_INFLATE = 1e-12
# The FFT's componentwise error per unit of input mass is ((1 + mu)^log2(N) - 1)
# (Higham 2002, Sec. 24.1, radix 2); mu = 16 units in the last place is a safe multiple of
# the butterflies' own (about 5).
_FFT_ULPS = 16.0
# Part of the caller's delta that the grid's ends and the window's tails may take up.
TAIL_SHARE = 1e-7
# Terms of one block of the direct DFT's sums.
_SUM_BLOCK = 32


@dataclass(frozen=True)
class Pessimistic:
    """Pessimistic privacy-loss distributions, one per row: P-masses at losses (lo + j) h,
    and at +infinity. Shapes: masses (G, J), infinity (G,)."""

    lo: int
    masses: FloatArray
    infinity: FloatArray


_THETAS = np.geomspace(1e-2, 1e4, 19)
# Rows of an FFT batch: (rows, N) complex temporaries of 32 MB at most.
_BATCH = 1 << 21


def _log_mgfs(pmf: Pessimistic, grid: float, theta: FloatArray) -> FloatArray:
    """log sum_j w_j e^(theta loss_j) of each row's finite part, from above. Shapes: -> (G, T).

    One product (G, I) @ (I, T) of the masses with e^(theta (loss - the largest loss)):
    a term that underflows there is below 1e-300 of its mass, and 1e-300 per term is added
    back."""
    width = pmf.masses.shape[1]
    losses = (pmf.lo + np.arange(width)) * grid
    peak = np.where(theta > 0, losses[-1], losses[0])
    with np.errstate(under="ignore"):
        scaled = np.exp(np.outer(losses, theta) - theta * peak)
    sums = pmf.masses @ scaled + width * 1e-300
    out = np.log(sums) + theta * peak
    return out + 1e-12 * (1 + np.abs(out))


def _window(up: FloatArray, down: FloatArray, grid: float, tail: float) -> tuple[int, int]:
    """Grid indices [bottom, top) holding all but ``tail`` of the composed finite mass at
    each end (Chernoff's bound at the best of a few thetas), with 0 inside. ``up`` and
    ``down``: the composed log MGFs at +theta and -theta."""
    log_tail = math.log(tail)
    with np.errstate(invalid="ignore"):
        highest = float(np.min((up - log_tail) / _THETAS))
        lowest = float(np.max((log_tail - down) / _THETAS))
    bottom = min(math.floor(lowest / grid) - 1, -1) if math.isfinite(lowest) else -1
    top = max(math.ceil(highest / grid) + 2, 2) if math.isfinite(highest) else 2
    return bottom, top


def compose_epsilon(pmf: Pessimistic, counts: IntArray, grid: float, delta: float) -> float:
    """The smallest epsilon >= 0 whose delta, for the composition of ``counts[g]`` copies of
    each row of ``pmf``, is at most ``delta``: an upper bound (module docstring), or inf.

    The composed finite part is c = IFFT(prod_g F_g^k_g) on a window of N = 2^m losses,
    each F_g taken about its largest atom (F_g = 1 + x_g, log F_g from log1p: relative to
    x_g), so the powers cost k |log F_g| ulps and no more. The bound on every entry's
    error (``_entry_error``) is charged to delta on every entry above epsilon.
    """
    counts = np.asarray(counts, dtype=np.int64)
    weights = counts.astype(np.float64)
    up = weights @ _log_mgfs(pmf, grid, _THETAS)
    down = weights @ _log_mgfs(pmf, grid, -_THETAS)
    bottom, top = _window(up, down, grid, delta * TAIL_SHARE)
    size = 1 << max(6, math.ceil(math.log2(top - bottom + 1)))
    spectrum, per_entry, shift = _composed_spectrum(pmf, counts, size)
    composed = np.fft.irfft(spectrum, n=size)
    # Losses [bottom, top) read from the window (mass wrapped from below bottom only adds
    # to them); the rest of the window is the mass at or above top, bounded whole.
    window = np.roll(composed, (shift - bottom) % size)[: top - bottom]
    masses = np.maximum(window, 0.0) + per_entry
    # The mass at +infinity: 1 - prod (1 - w_g)^k_g, rounded up (1 where a row's is 1).
    with np.errstate(divide="ignore"):
        infinity = -math.expm1(float(weights @ np.log1p(-pmf.infinity))) * (1 + _INFLATE) + _U
    # Chernoff's bound on the finite mass at or above top.
    above = float(np.exp(np.min(up - _THETAS * top * grid))) * (1 + _INFLATE)
    return _epsilon_of(masses, bottom, grid, delta - infinity - above)


def _composed_spectrum(
    pmf: Pessimistic, counts: IntArray, size: int
) -> tuple[NDArray[np.complex128], float, int]:
    """prod_g F_g^k_g at the N = ``size`` frequencies of an rfft, the bound on each entry's
    error after the inverse FFT, and the shift of the origin (sum_g k_g (largest atom's
    index)): each F_g is taken about its largest atom.

    Only the frequencies below ``_live`` are computed (by a DFT of the rows where they are
    few, summed in blocks, else by their rfft): beyond them |C| is below ``_NEGLIGIBLE`` and
    charged whole.
    """
    rows, width = pmf.masses.shape
    half = size // 2 + 1
    weights = counts.astype(np.float64)
    live, beyond = _live(pmf, weights, size)
    log_modulus = np.zeros(live)  # sum_g k_g log |F_g|
    argument = np.zeros(live)  # sum_g k_g arg F_g
    modulus_sum = np.zeros(live)  # sum_g k_g |log F_g|
    perturbed = np.zeros(live)  # sum_g k_g log(|F_g| + e_g)
    centres = np.argmax(pmf.masses, axis=1)
    shift = sum(int(k) * (pmf.lo + int(c)) for k, c in zip(counts, centres, strict=True))
    direct = live * width <= 4 * size * math.log2(size)
    if direct:
        omega, cosines, sines, transform_error = _twiddles(width, live, size)
        blocks = cosines.shape[0]
    else:
        transform_error = (1 + _FFT_ULPS * _U) ** math.log2(size) - 1
    batch = max(1, _BATCH // ((live * max(1, width // _SUM_BLOCK)) if direct else size))
    for start in range(0, rows, batch):
        part = slice(start, start + batch)
        rest = pmf.masses[part].copy()
        n = rest.shape[0]
        rest[np.arange(n), centres[part]] = 0.0
        infinity = pmf.infinity[part]
        outside = rest.sum(axis=1) + infinity  # 1 - the largest atom
        if direct:
            about = np.exp(1j * np.outer(centres[part], omega))  # the origin at each centre
            grouped = np.zeros((n, blocks * _SUM_BLOCK))
            grouped[:, :width] = rest
            # A product per block (BLAS's: 1.3-1.5 times faster than a stacked matmul here),
            # the blocks' sums added in turn: the same sums and the same bound as above.
            real, imaginary = np.zeros((n, live)), np.zeros((n, live))
            for block in range(blocks):
                terms = grouped[:, block * _SUM_BLOCK : (block + 1) * _SUM_BLOCK]
                real += terms @ cosines[block]
                imaginary += terms @ sines[block]
            x = (real - 1j * imaginary) * about - outside[:, None]
        else:
            offsets = (np.arange(width)[None, :] - centres[part][:, None]) % size
            flat = (np.arange(n)[:, None] * size + offsets).ravel()
            folded = np.bincount(flat, weights=rest.ravel(), minlength=n * size)
            x = np.fft.rfft(folded.reshape(n, size), axis=1)[:, :live] - outside[:, None]
        # log(1 + x): the modulus from |1 + x| (to an ulp of 1: k ulps after the power,
        # charged below), the argument by atan2.
        size_f = np.abs(1 + x)
        with np.errstate(divide="ignore"):
            log_f = np.log(size_f)
        angle = np.arctan2(x.imag, 1 + x.real)
        k = weights[part]
        log_modulus += k @ log_f
        argument += k @ angle
        modulus_sum += k @ (np.abs(log_f) + np.abs(angle) + 2.0)
        # |F_g - computed F_g| <= e_g: the transform's componentwise bound on the rest, and
        # the subtraction of ``outside``.
        error = transform_error * (outside - infinity) + 4 * _U * outside
        with np.errstate(divide="ignore"):
            perturbed += k @ np.log(size_f + error[:, None])
    modulus = np.exp(log_modulus)
    spectrum = np.zeros(half, dtype=np.complex128)
    spectrum[:live] = modulus * (np.cos(argument) + 1j * np.sin(argument))
    error = _entry_error(modulus, log_modulus, perturbed, modulus_sum, rows, size)
    return spectrum, error + beyond, shift


def _twiddles(width: int, live: int, size: int) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """The direct DFT's frequencies omega (live,), its cosines and sines in blocks of
    ``_SUM_BLOCK`` rows (blocks, _SUM_BLOCK, live) over the rows' ``width`` padded, and the
    bound on its relative error per entry."""
    omega = 2 * math.pi * np.arange(live) / size
    padded = -(-width // _SUM_BLOCK) * _SUM_BLOCK
    phases = np.outer(np.arange(padded), omega)
    blocks = padded // _SUM_BLOCK
    cosines = np.cos(phases).reshape(blocks, _SUM_BLOCK, live)
    sines = np.sin(phases).reshape(blocks, _SUM_BLOCK, live)
    # Sums of _SUM_BLOCK terms, then of the blocks' sums in turn (each an ulp per term of
    # the terms' size), twiddles within an ulp of their argument (at most omega_max padded,
    # each cos or sin within an ulp), the origin's phase and product.
    largest = float(omega[-1]) * padded if live else 0.0
    return omega, cosines, sines, (_SUM_BLOCK + blocks + 2 * largest + 16) * _U


# |C| below this at every frequency left out: charged to every entry whole.
_NEGLIGIBLE = 1e-22


def _live(pmf: Pessimistic, weights: FloatArray, size: int) -> tuple[int, float]:
    """How many of the rfft's frequencies to compute, and a bound on |C| at all the others.

    For atoms w_a, w_b d grid steps apart, |w_a + w_b e^(i omega d)| = w_a + w_b - c with
    c >= t w_a w_b / (w_a + w_b), t = 1 - cos(omega d), which grows with omega on [0, pi/d].
    Pairing a row's atoms d apart, |F(omega)| <= 1 - t A_d (A_d: the pairs' w_a w_b /
    (w_a + w_b) summed), so on [pi/(2d), pi/d] (d = 1, 2, 4, ...; the last level from 0)
    prod_g (1 - t A_gd)^k_g at the interval's lowest omega bounds |C|. The bound beyond a
    frequency is the largest of these: it falls as the frequency rises, and the first
    frequency where it is below ``_NEGLIGIBLE`` is found by bisection.
    """
    half = size // 2 + 1
    masses = pmf.masses
    levels = []
    distance = 1
    while 2 * distance <= masses.shape[1]:
        blocks = masses.shape[1] // (2 * distance)
        paired = masses[:, : blocks * 2 * distance].reshape(masses.shape[0], blocks, 2, distance)
        first, second = paired[:, :, 0, :], paired[:, :, 1, :]
        total = first + second
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(total > 0, first * second / total, 0.0).sum(axis=(1, 2))
        levels.append((distance, share * (1 - 1e-9)))
        distance *= 2
    if not levels:
        return half, 0.0

    def log_bound(step: int) -> float:
        """log of the bound on |C| at every frequency from ``step`` on."""
        omega = 2 * math.pi * step / size
        found = -math.inf
        for index, (distance, share) in enumerate(levels):
            top = math.pi / distance
            low = 0.0 if index == len(levels) - 1 else top / 2
            if omega > top:
                continue
            t = 1 - math.cos(max(low, omega) * distance)
            with np.errstate(divide="ignore"):
                value = float(weights @ np.log1p(-np.minimum(t * share, 1.0)))
            found = max(found, value)
        return found

    limit = math.log(_NEGLIGIBLE)
    if log_bound(half - 1) >= limit:
        return half, 0.0
    low, high = 0, half - 1  # the bound at high is below the limit; at low it need not be
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if log_bound(middle) < limit else (middle, high)
    return high, math.exp(log_bound(high))


def _entry_error(
    modulus: FloatArray,
    log_modulus: FloatArray,
    perturbed: FloatArray,
    modulus_sum: FloatArray,
    groups: int,
    size: int,
) -> float:
    """A bound on every entry's error after the inverse FFT: the mean over the frequencies
    of each one's error (an inverse DFT entry is such a mean), which is
    |prod (F + e)^k - prod F^k| <= prod (|F| + e)^k - prod |F|^k (the inputs' errors), plus a
    few ulps of |C| times sum k (|log F| + 2) (each log to an ulp of 1, the sums of logs,
    exp, cos and sin), plus the inverse FFT's componentwise bound."""
    with np.errstate(invalid="ignore", over="ignore"):
        gap = perturbed - log_modulus
        power = np.where(
            gap < 0.5, modulus * np.expm1(np.minimum(gap, 0.5)), np.exp(perturbed) - modulus
        )
        evaluation = np.where(modulus > 0, modulus * _U * (2 * (groups + 4) * modulus_sum + 4), 0.0)
    error = power + evaluation + modulus * ((1 + _FFT_ULPS * _U) ** math.log2(size) - 1)
    # Every frequency but 0 and the Nyquist one stands for two of the N (rfft).
    total = 2 * float(error.sum()) - float(error[0])
    if error.size == size // 2 + 1:
        total -= float(error[-1])
    return total / size * (1 + 1e-6)


def _epsilon_of(masses: FloatArray, bottom: int, grid: float, target: float) -> float:
    """The smallest eps >= 0 with sum_L m_L (1 - e^(eps - L grid))_+ <= target, for masses
    m at losses (bottom + i) grid: piecewise in e^eps between grid points, solved there."""
    if not target > 0:
        return math.inf
    size = masses.size
    # A[i] = sum_{j > i} m_j, B[i] = sum_{j > i} m_j e^-(j - i) grid; both rounded to their
    # safe side (relative errors of at most size ulps, from the running sums).
    ratio = math.exp(-grid)
    shifted = np.append(masses[1:], 0.0)[::-1]
    above = np.cumsum(shifted)[::-1] * (1 + 2 * size * _U)
    weighted = _decaying_sums(shifted, ratio)[::-1] * (1 - 2 * size * _U)
    delta_at = above - weighted  # delta at eps = (bottom + i) grid
    zero = -bottom
    if delta_at[zero] <= target:
        return 0.0
    beyond = np.flatnonzero(delta_at[zero:] <= target)
    if beyond.size == 0:
        return math.inf
    index = zero + int(beyond[0])  # delta(eps_index) <= target < delta(eps_index - 1)
    start = index - 1
    # On (eps_start, eps_index]: delta = A[start] - e^(eps - eps_start) B[start].
    solved = math.log((above[start] - target) / weighted[start]) if weighted[start] > 0 else grid
    step = min(max(solved, 0.0), grid)
    eps = (bottom + start) * grid + step
    return math.nextafter(eps * (1 + 4 * _U) + 4 * _U, math.inf)


def _decaying_sums(values: FloatArray, ratio: float) -> FloatArray:
    """y_i = ratio x_i + ratio y_(i-1) (y_(-1) = 0): ``scipy.signal.lfilter([ratio], [1,
    -ratio], x)``'s recurrence with its roundings, in its order (the same doubles), without
    importing scipy.signal (0.3-0.5 s) for it. Some 25 ms for 1e5 values. Shapes: (I,)."""
    found = []
    total = 0.0
    for value in values.tolist():
        total = ratio * value + ratio * total
        found.append(total)
    return np.array(found, dtype=np.float64)
