"""Pure statistics: intervals, paired differences, sample sizes and the normal quantile.

Numbers in, numbers (or small frozen dataclasses) out; no I/O and no configuration objects.
Nothing here imports scipy or numpy: the special functions are in :mod:`._special`.
"""

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

__all__ = [
    "Z95",
    "Interval",
    "MeanSummary",
    "PairedDifference",
    "SizeResult",
    "acklam_ppf",
    "beta_ppf",
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
