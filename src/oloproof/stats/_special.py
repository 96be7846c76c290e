"""Special functions in pure Python: incomplete beta, its inverse, t and normal quantiles.

Why not scipy: importing ``scipy.special`` alone costs about a third of a second, more than the
whole start-up budget of the command line. These functions need only :mod:`math`.

Accuracy (checked against scipy in ``tests/stats``): the regularized incomplete beta function
to about 1e-14 relative for parameters up to a few thousand, and 1e-10 or better for very
unbalanced parameters in the millions (the continued fraction is least well conditioned there);
quantiles are solved to the last few ulps of that function, in whichever of x and 1 - x is
small, so both keep their relative accuracy.

Methods:

- ``betainc``: the continued fraction for I_x(a, b) (Abramowitz & Stegun 26.5.8), evaluated with
  the modified Lentz algorithm (Lentz 1976; Thompson & Barnett 1986), as described in Numerical
  Recipes (Press et al., 3rd ed., section 6.4). The factor x^a (1-x)^b / B(a, b) in front of it
  is computed, for large parameters, from Stirling's series without forming the large
  logarithms whose cancellation would lose digits, following the idea of DiDonato & Morris
  (1992), "Algorithm 708: significant digit computation of the incomplete beta function
  ratios", ACM TOMS 18(3):360-373.
- ``beta_ppf``: Newton's method on log I_x in log x, kept inside a bracket that shrinks at each
  step and falling back to bisection when a step would leave it; started from the usual normal
  or power approximations (Abramowitz & Stegun 26.5.22).
- ``t_ppf``: through the relation P(|T| > t) = I_{df/(df+t^2)}(df/2, 1/2).
- ``acklam_ppf``: Acklam's rational approximation, kept only for the provisional z (stats/normal.py).
"""

from __future__ import annotations

import math

__all__ = [
    "acklam_ppf",
    "beta_ppf",
    "betainc",
    "binom_pmf",
    "binom_tails",
    "t_isf",
    "t_ppf",
]

_LN_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_EPS = 2.220446049250313e-16
_TINY = 1e-300


# --------------------------------------------------------------------------- normal quantile

# Peter J. Acklam's coefficients for his rational approximation of the inverse normal CDF
# (relative error below 1.15e-9 before any refinement).
_ACK_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_ACK_B = (
    -5.447609879822406e01,
    1.615858368580409e02,
    -1.556989798598866e02,
    6.680131188771972e01,
    -1.328068155288572e01,
)
_ACK_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_ACK_D = (
    7.784695709041462e-03,
    3.224671290700398e-01,
    2.445134137142996e00,
    3.754408661907416e00,
)
_ACK_P_LOW = 0.02425


def acklam_ppf(p: float) -> float:
    """Acklam's rational approximation of the standard normal quantile, without refinement.

    The evaluation order is fixed on purpose: the published provisional figures were computed
    with exactly this expression, and ``acklam_ppf(0.975)`` is ``1.959963986120195``.
    """
    if not 0.0 < p < 1.0:
        if p == 0.0:
            return -math.inf
        if p == 1.0:
            return math.inf
        raise ValueError(f"probability must lie in [0, 1], got {p!r}")
    a, b, c, d = _ACK_A, _ACK_B, _ACK_C, _ACK_D
    if p < _ACK_P_LOW:
        q = math.sqrt(-2.0 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0
        )
    if p <= 1.0 - _ACK_P_LOW:
        q = p - 0.5
        r = q * q
        return (
            (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
            * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0)
        )
    q = math.sqrt(-2.0 * math.log1p(-p))
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
        (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0
    )


def _stirling_error(x: float) -> float:
    """log Gamma(x) - [(x - 1/2) log x - x + log sqrt(2 pi)], the remainder of Stirling's formula."""
    if x < 10.0:
        return math.lgamma(x) - ((x - 0.5) * math.log(x) - x + _LN_SQRT_2PI)
    r = 1.0 / (x * x)
    # Stirling's series: 1/(12x) - 1/(360x^3) + 1/(1260x^5) - 1/(1680x^7) + 1/(1188x^9) - ...
    # Seven terms are below 1e-17 relative for x >= 10.
    return (
        1.0
        / x
        * (
            1.0 / 12.0
            - r
            * (
                1.0 / 360.0
                - r
                * (
                    1.0 / 1260.0
                    - r
                    * (
                        1.0 / 1680.0
                        - r * (1.0 / 1188.0 - r * (691.0 / 360360.0 - r * (1.0 / 156.0)))
                    )
                )
            )
        )
    )


def _log1pmx(e: float) -> float:
    """log(1 + e) - e, accurate also for small e (where the two terms nearly cancel)."""
    if abs(e) > 0.1:
        return math.log1p(e) - e
    # -e^2/2 + e^3/3 - e^4/4 + ...; |e| <= 0.1 needs at most ~16 terms for full precision.
    term = e
    total = 0.0
    k = 2
    while True:
        term *= -e
        add = term / k
        total += add
        if abs(add) <= 1e-17 * abs(total):
            return total
        k += 1


def _log_beta(a: float, b: float) -> float:
    """log B(a, b)."""
    if a < 10.0 and b < 10.0:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    if a > b:
        a, b = b, a
    # b >= 10: lgamma(b) - lgamma(a + b) through Stirling's formula, without forming the two
    # large logarithms whose difference would lose digits.
    s = a + b
    diff = (
        -(s - 0.5) * math.log1p(a / b)
        - a * math.log(b)
        + a
        + _stirling_error(b)
        - _stirling_error(s)
    )
    return math.lgamma(a) + diff


def _log_prefactor(a: float, b: float, x: float, y: float) -> float:
    """log( x^a * y^b / B(a, b) ) with y = 1 - x given separately (it may be the exact one)."""
    if a >= 10.0 and b >= 10.0:
        # DiDonato & Morris style: with x0 = a/(a+b), write the power terms relative to x0.
        # With r1 = x/x0 and r2 = y/y0, a*log(r1) + b*log(r2) = a*u + b*v where
        # u = log(r1) - (r1 - 1) and v = log(r2) - (r2 - 1), because a(r1 - 1) + b(r2 - 1) = 0.
        # Near x0 the r - 1 are computed from lam = a - (a+b)x, without cancellation.
        s = a + b
        if x <= 0.5:
            lam = a - s * x
        else:
            lam = s * y - b
        e1 = -lam / a
        e2 = lam / b
        if abs(e1) < 0.5:
            u = _log1pmx(e1)
        else:
            r1 = x * s / a
            u = math.log(r1) - (r1 - 1.0)
        if abs(e2) < 0.5:
            v = _log1pmx(e2)
        else:
            r2 = y * s / b
            v = math.log(r2) - (r2 - 1.0)
        return (
            a * u
            + b * v
            + 0.5 * math.log(a * b / s)
            - _LN_SQRT_2PI
            - (_stirling_error(a) + _stirling_error(b) - _stirling_error(s))
        )
    # Of x and y = 1 - x, the smaller one is exact (either it was given, or it was obtained
    # from the larger one by a subtraction that is exact in floating point for values >= 1/2),
    # so the logarithm of the larger one is taken through log1p of the smaller one.
    if x <= y:
        log_x = math.log(x)
        log_y = math.log1p(-x)
    else:
        log_x = math.log1p(-y)
        log_y = math.log(y)
    return a * log_x + b * log_y - _log_beta(a, b)


# ----------------------------------------------------------------- regularized incomplete beta

_MAX_CF_ITERATIONS = 1_000_000


def _beta_cf(a: float, b: float, x: float, y: float) -> float:
    """The continued fraction of I_x(a, b), by the modified Lentz method.

    Converges quickly for x < (a + 1) / (a + b + 2); the number of terms grows like
    sqrt(max(a, b)) near that point.
    """
    apb = a + b
    ap1 = a + 1.0
    am1 = a - 1.0
    c = 1.0
    if x <= 0.5:
        d = 1.0 - apb * x / ap1
    else:
        # the same value, 1 - (a+b)x/(a+1), computed from the exact y = 1 - x: for x near 1
        # and a much larger than b the direct form loses most of its digits to cancellation
        d = (1.0 - b + apb * y) / ap1
    if abs(d) < _TINY:
        d = _TINY
    d = 1.0 / d
    h = d
    m = 1
    while m < _MAX_CF_ITERATIONS:
        m2 = 2 * m
        # even step
        num = m * (b - m) * x / ((am1 + m2) * (a + m2))
        d = 1.0 + num * d
        if abs(d) < _TINY:
            d = _TINY
        c = 1.0 + num / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        h *= d * c
        # odd step
        num = -(a + m) * (apb + m) * x / ((a + m2) * (ap1 + m2))
        d = 1.0 + num * d
        if abs(d) < _TINY:
            d = _TINY
        c = 1.0 + num / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) <= _EPS:
            return h
        m += 1
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b})")


def _betainc_pair(a: float, b: float, x: float, y: float) -> tuple[float, float]:
    """(I_x(a, b), 1 - I_x(a, b)) with y = 1 - x given separately.

    One of the two is computed directly and the other by subtraction; which one follows the
    usual switch at x = (a + 1) / (a + b + 2), on whose side the continued fraction converges.
    """
    if x <= 0.0:
        return 0.0, 1.0
    if y <= 0.0:
        return 1.0, 0.0
    if x * (a + b + 2.0) < a + 1.0:
        front = math.exp(_log_prefactor(a, b, x, y)) / a
        lower = front * _beta_cf(a, b, x, y)
        return lower, 1.0 - lower
    front = math.exp(_log_prefactor(b, a, y, x)) / b
    upper = front * _beta_cf(b, a, y, x)
    return 1.0 - upper, upper


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and x in [0, 1]."""
    if a <= 0.0 or b <= 0.0:
        raise ValueError("beta parameters must be positive")
    return _betainc_pair(a, b, x, 1.0 - x)[0]


def _beta_density_times_x(a: float, b: float, x: float, y: float) -> float:
    """x * f(x), where f is the Beta(a, b) density; used for Newton steps in log x."""
    return math.exp(_log_prefactor(a, b, x, y)) / y


# ---------------------------------------------------------------------- inverse of I_x(a, b)


def _initial_guess(a: float, b: float, p: float) -> float:
    """A starting point for the Beta(a, b) quantile at lower-tail probability p <= 1/2."""
    if a >= 1.0 and b >= 1.0:
        # Normal approximation with the correction of Abramowitz & Stegun 26.5.22.
        t = math.sqrt(-2.0 * math.log(p))
        z = (2.30753 + 0.27061 * t) / (1.0 + t * (0.99229 + 0.04481 * t)) - t
        lam = (z * z - 3.0) / 6.0
        h = 2.0 / (1.0 / (2.0 * a - 1.0) + 1.0 / (2.0 * b - 1.0))
        w = z * math.sqrt(h + lam) / h - (1.0 / (2.0 * b - 1.0) - 1.0 / (2.0 * a - 1.0)) * (
            lam + 5.0 / 6.0 - 2.0 / (3.0 * h)
        )
        if 2.0 * w > 700.0:
            return 1e-300
        return a / (a + b * math.exp(2.0 * w))
    # Power approximations of the two tails, I ~ x^a / (a B) and 1 - I ~ (1-x)^b / (b B).
    lab = _log_beta(a, b)
    left = math.exp(a * math.log(a / (a + b)) - lab) / a
    right = math.exp(b * math.log(b / (a + b)) - lab) / b
    total = left + right
    if p < left / total:
        return math.exp((math.log(p) + math.log(a) + lab) / a)
    return -math.expm1((math.log1p(-p) + math.log(b) + lab) / b)


def _solve_log_newton(a: float, b: float, target: float, upper_tail: bool, x0: float) -> float:
    """Solve I_x(a, b) = target (or 1 - I_x(a, b) = target when ``upper_tail``) for x.

    Newton's method on u = log x for h(u) = log(tail) - log(target): near 0 the tail behaves
    like a power of x, so h is almost linear in u and the method converges in a few steps even
    for very small quantiles. A bracket [lo, hi] is kept and any step leaving it is replaced by
    a bisection (geometric when the bracket spans orders of magnitude).
    """
    lo, hi = 0.0, 1.0
    x = min(max(x0, 1e-300), 1.0 - 1e-16)
    log_target = math.log(target)
    for _ in range(300):
        y = 1.0 - x
        lower, upper = _betainc_pair(a, b, x, y)
        tail = upper if upper_tail else lower
        if tail <= 0.0:
            # Underflow: the quantile lies on the side where the tail grows.
            if upper_tail:
                hi = x
            else:
                lo = x
            x_new = _bisect(lo, hi)
        else:
            h = math.log(tail) - log_target
            # the lower tail grows with x, the upper tail shrinks
            increasing = not upper_tail
            if h == 0.0:
                return x
            if (h < 0.0) == increasing:
                lo = x
            else:
                hi = x
            slope = _beta_density_times_x(a, b, x, y) / tail
            if upper_tail:
                slope = -slope
            if slope == 0.0 or not math.isfinite(slope):
                x_new = _bisect(lo, hi)
            else:
                step = h / slope
                if abs(step) > 700.0:
                    x_new = _bisect(lo, hi)
                else:
                    x_new = x * math.exp(-step)
                    if not lo < x_new < hi:
                        x_new = _bisect(lo, hi)
        if abs(x_new - x) <= 4.0 * _EPS * x_new or hi - lo <= 4.0 * _EPS * hi:
            return x_new
        x = x_new
    raise ArithmeticError(f"beta quantile did not converge (a={a}, b={b}, target={target})")


def _bisect(lo: float, hi: float) -> float:
    if lo > 0.0 and hi > 4.0 * lo:
        return math.sqrt(lo * hi)
    if lo == 0.0:
        return hi * 0.25
    return 0.5 * (lo + hi)


def _guess(a: float, b: float, p: float, q: float) -> float:
    """A starting point for the Beta(a, b) quantile with lower tail p and upper tail q."""
    if p <= q:
        return _initial_guess(a, b, p)
    return 1.0 - _initial_guess(b, a, q)


def _beta_quantile(a: float, b: float, p: float, q: float) -> tuple[float, float]:
    """The Beta(a, b) quantile x with I_x(a, b) = p, where q = 1 - p is given separately.

    Returns (x, 1 - x), both accurate. The equation is solved for whichever of x and 1 - x is
    below 1/2 (found by comparing p with I_{1/2}(a, b)), so that neither is obtained by a
    subtraction that loses its leading digits; and against whichever of p and q is the
    smaller, so that a tail probability near 1 is never the target.
    """
    if p <= 0.0:
        return 0.0, 1.0
    if q <= 0.0:
        return 1.0, 0.0
    at_half = _betainc_pair(a, b, 0.5, 0.5)
    if p <= at_half[0]:
        guess = min(max(_guess(a, b, p, q), 1e-300), 0.5)
        if p <= q:
            x = _solve_log_newton(a, b, p, False, guess)
        else:
            x = _solve_log_newton(a, b, q, True, guess)
        return x, 1.0 - x
    # 1 - X ~ Beta(b, a), with P(1 - X <= y) = q and P(1 - X >= y) = p.
    guess = min(max(_guess(b, a, q, p), 1e-300), 0.5)
    if q <= p:
        y = _solve_log_newton(b, a, q, False, guess)
    else:
        y = _solve_log_newton(b, a, p, True, guess)
    return 1.0 - y, y


def beta_ppf(q: float, a: float, b: float) -> float:
    """The quantile function of the Beta(a, b) distribution: x with I_x(a, b) = q."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"probability must lie in [0, 1], got {q!r}")
    if a <= 0.0 or b <= 0.0:
        raise ValueError("beta parameters must be positive")
    return _beta_quantile(a, b, q, 1.0 - q)[0]


def t_ppf(q: float, df: float) -> float:
    """The quantile function of Student's t distribution with ``df`` degrees of freedom.

    For T with df degrees of freedom, P(|T| > t) = I_x(df/2, 1/2) with x = df / (df + t^2).
    The equation is solved for y = 1 - x = t^2 / (df + t^2) ~ Beta(1/2, df/2), so that t is
    obtained as sqrt(df * y / x) without subtracting nearly equal numbers.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"probability must lie in [0, 1], got {q!r}")
    if not df > 0.0:
        raise ValueError("degrees of freedom must be positive")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -_t_upper(q, df)
    return _t_upper(1.0 - q, df)


def t_isf(tail: float, df: float) -> float:
    """The t value with upper-tail probability ``tail``: P(T > t) = tail.

    Preferred to ``t_ppf(1 - tail, df)`` for small tails, where ``1 - tail`` would round.
    """
    if not 0.0 <= tail <= 1.0:
        raise ValueError(f"probability must lie in [0, 1], got {tail!r}")
    if not df > 0.0:
        raise ValueError("degrees of freedom must be positive")
    if tail == 0.5:
        return 0.0
    if tail > 0.5:
        return -_t_upper(1.0 - tail, df)
    return _t_upper(tail, df)


def _t_upper(tail: float, df: float) -> float:
    """The t value with upper-tail probability ``tail`` (< 1/2)."""
    if tail <= 0.0:
        return math.inf
    two_sided = 2.0 * tail
    # Y = T^2/(df + T^2) ~ Beta(1/2, df/2), with P(Y >= y) = two_sided. Both y and x = 1 - y
    # come back accurate, so t = sqrt(df * y / x) keeps its relative accuracy.
    y, x = _beta_quantile(0.5, 0.5 * df, 1.0 - two_sided, two_sided)
    if x <= 0.0:
        return math.inf
    return math.sqrt(df * y / x)


# ----------------------------------------------------------------------------- binomial


def binom_pmf(k: int, n: int, p: float) -> float:
    """P(X = k) for X ~ Binomial(n, p), 0 < p < 1."""
    if k < 0 or k > n:
        return 0.0
    # C(n, k) p^k (1-p)^(n-k) = p^(k+1) (1-p)^(n-k+1) / B(k+1, n-k+1) / ((n+1) p (1-p))
    a = k + 1.0
    b = n - k + 1.0
    return math.exp(_log_prefactor(a, b, p, 1.0 - p)) / ((n + 1.0) * p * (1.0 - p))


def binom_tails(k: int, n: int, p: float) -> tuple[float, float]:
    """(P(X <= k), P(X > k)) for X ~ Binomial(n, p), 0 < p < 1, each accurate in its tail."""
    if k < 0:
        return 0.0, 1.0
    if k >= n:
        return 1.0, 0.0
    # P(X <= k) = I_{1-p}(n - k, k + 1)
    return _betainc_pair(n - k, k + 1.0, 1.0 - p, p)
