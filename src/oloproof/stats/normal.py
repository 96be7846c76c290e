"""The normal quantile, in the two forms Oloproof needs.

- :func:`acklam_ppf` is Peter J. Acklam's rational approximation (2003, "An algorithm for
  computing the inverse normal cumulative distribution function"), used *without* its
  refinement step. Its relative error is below 1.15e-9. The provisional Wilson figures that a
  run streams carry its z, ``Z95 = acklam_ppf(0.975) = 1.959963986120195`` (the exact value is
  1.959963984540054), and the specification asks for those figures to be reproduced to 1e-12.
- :func:`norm_ppf` is the exact quantile (to double precision), used by every method that
  decides something, such as the paired Newcombe interval.
"""

from __future__ import annotations

from oloproof.stats._special import acklam_ppf, norm_ppf

__all__ = ["Z95", "acklam_ppf", "norm_ppf"]

#: The z of the provisional 95% Wilson interval: Acklam's approximation at 0.975.
Z95: float = acklam_ppf(0.975)
