"""Pure statistics: intervals (Clopper–Pearson, betting, Student t, Wilson), paired
differences, sample sizes and the normal quantile.

Numbers in, numbers (or small frozen dataclasses) out; no I/O and no configuration objects.
Nothing here imports scipy or numpy: the special functions are in :mod:`._special`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.stats.betting import betting_mean, betting_ranges
    from oloproof.stats.intervals import (
        Interval,
        MeanSummary,
        beta_ppf,
        clopper_pearson,
        clopper_pearson_bounded,
        student_t_mean,
        student_t_mean_bounded,
        t_ppf,
        wilson,
        worst_case_t_bounds,
    )
    from oloproof.stats.normal import Z95, acklam_ppf
    from oloproof.stats.paired import (
        PairedDifference,
        paired_mean_difference,
        paired_proportion_difference,
    )
    from oloproof.stats.sample_size import (
        SizeResult,
        binary_rule_size,
        mean_rule_size,
        paired_binary_rule_size,
        paired_mean_rule_size,
    )

# Each name is imported from its module on first use: deciding a run needs the
# intervals, not the paired statistics or the sample-size search.
_HOMES = {
    "betting_mean": "oloproof.stats.betting",
    "betting_ranges": "oloproof.stats.betting",
    "Interval": "oloproof.stats.intervals",
    "MeanSummary": "oloproof.stats.intervals",
    "beta_ppf": "oloproof.stats.intervals",
    "clopper_pearson": "oloproof.stats.intervals",
    "clopper_pearson_bounded": "oloproof.stats.intervals",
    "student_t_mean": "oloproof.stats.intervals",
    "student_t_mean_bounded": "oloproof.stats.intervals",
    "t_ppf": "oloproof.stats.intervals",
    "wilson": "oloproof.stats.intervals",
    "worst_case_t_bounds": "oloproof.stats.intervals",
    "Z95": "oloproof.stats.normal",
    "acklam_ppf": "oloproof.stats.normal",
    "PairedDifference": "oloproof.stats.paired",
    "paired_mean_difference": "oloproof.stats.paired",
    "paired_proportion_difference": "oloproof.stats.paired",
    "SizeResult": "oloproof.stats.sample_size",
    "binary_rule_size": "oloproof.stats.sample_size",
    "mean_rule_size": "oloproof.stats.sample_size",
    "paired_binary_rule_size": "oloproof.stats.sample_size",
    "paired_mean_rule_size": "oloproof.stats.sample_size",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'oloproof.stats' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "Z95",
    "Interval",
    "MeanSummary",
    "PairedDifference",
    "SizeResult",
    "acklam_ppf",
    "beta_ppf",
    "betting_mean",
    "betting_ranges",
    "binary_rule_size",
    "clopper_pearson",
    "clopper_pearson_bounded",
    "mean_rule_size",
    "paired_binary_rule_size",
    "paired_mean_difference",
    "paired_mean_rule_size",
    "paired_proportion_difference",
    "student_t_mean",
    "student_t_mean_bounded",
    "t_ppf",
    "wilson",
    "worst_case_t_bounds",
]
