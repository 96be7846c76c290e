"""The z of the provisional Wilson figures.

The provisional Wilson figures that a run streams carry Peter J. Acklam's rational
approximation of the normal quantile at 0.975 (2003, "An algorithm for computing the inverse
normal cumulative distribution function", without its refinement step):
``Z95 = 1.959963986120195`` (the exact value is 1.959963984540054). The specification asks for
those figures to be reproduced to 1e-12, so that z is kept as it is. Every method that decides
something uses the exact quantile, ``statistics.NormalDist().inv_cdf``.
"""

from __future__ import annotations

from oloproof.stats._special import acklam_ppf

__all__ = ["Z95", "acklam_ppf"]

#: The z of the provisional 95% Wilson interval: Acklam's approximation at 0.975.
Z95: float = acklam_ppf(0.975)
