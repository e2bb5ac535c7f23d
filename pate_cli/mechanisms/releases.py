"""The smooth-sensitivity releases an answer step can bring (its ``release`` member).

A release publishes a run's data-dependent epsilon with Gaussian noise scaled to its smooth
sensitivity (GNSS, Papernot et al. 2018, Appendix B). What bounds that sensitivity is a
table of ``pate_cli.core`` made for one kind of noisy max: an answer step says which by the
release it returns, a value here, and ``pate_cli.release.gnss`` makes it (a
:class:`ReleaseMaker`: one method per kind, as a part is read by a ``PartReader``). No
release is looked up by a name, and a release covers only the threshold steps it says it
covers: the maker refuses the others in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ReleaseMaker(Protocol[T_co]):
    """What makes a release (``pate_cli.release.gnss``): one method per kind, each given it."""

    def gaussian(self, release: GaussianRelease) -> T_co:
        """The release of a Gaussian noisy max, with a Gaussian threshold step or none."""

    def laplace(self, release: LaplaceRelease) -> T_co:
        """The release of a Laplace noisy max that answers every query (no threshold step)."""


class StepRelease(Protocol):
    """What an answer step's ``release`` returns: a release ``maker`` can make."""

    def made_by(self, maker: ReleaseMaker[T]) -> T:
        """What ``maker`` makes of this release."""


@dataclass(frozen=True)
class GaussianRelease:
    """GNMax's release (2018, Appendix B): the local sensitivity of Theorem 6's bound at
    answer noise ``sigma`` (``core.ls_gnmax``, composed in ``core.smooth``) under conditions
    C5 and C6, and of a threshold step's when the mechanism has one, which must be a
    Gaussian threshold (its ``gaussian`` member: the threshold on the rounded top count and
    the noise sigma1 its table is made for); any other threshold step is refused."""

    sigma: float

    def made_by(self, maker: ReleaseMaker[T]) -> T:
        return maker.gaussian(self)


@dataclass(frozen=True)
class LaplaceRelease:
    """LNMax's release (2017's Theorem 3 bound over the ball of q, ``core.ls_lnmax``) at
    Laplace noise of scale 1/``gamma``: one step, every query answered. A mechanism with a
    threshold step is refused (the table knows no threshold, so the release would take the
    number answered as data-independent)."""

    gamma: float

    def made_by(self, maker: ReleaseMaker[T]) -> T:
        return maker.laplace(self)
