"""Is the one private API we keep worth it? CPython's C JSON encoder, called directly.

    python bench/encoders.py [--repeat N]

``oloproof._json`` builds its encoders once and calls ``json.encoder.c_make_encoder``
directly (no circular-reference check, no per-call set-up). The public way is
``json.JSONEncoder(...).encode``. A run encodes five or six values per case (the
input and output for their digests and the store, the judge key, each judgment), so
this measures both ways on values shaped like the support_bot example's, as the
median over ``--repeat`` rounds of the time per encoding, and the difference per case.
The outputs are compared first: the two ways must write the same text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, record, write_section

from oloproof._json import canonical_json

VALUES = {
    "case input": {"message": "I was charged twice for order 48213, please refund one.",
                   "customer": {"tier": "pro", "region": "eu"}},
    "system output": {"label": "refund", "reply": "Sorry about that: a refund of the second "
                      "charge is on its way.", "confidence": 0.87, "tags": ["billing", "dup"]},
    "judgment": {"status": "OK", "passed": True, "score": None, "reason": None,
                 "latency_ms": 1.25, "attempts": 1},
}
PER_CASE = 6  # encodings per case (see the module docstring)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=50_000)
    args = parser.parse_args()
    public = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
    ).encode
    rows = []
    direct_all, public_all = [], []
    for name, value in VALUES.items():
        assert canonical_json(value) == public(value), name
        fast = [t / args.number * 1e9 for t in timeit.repeat(
            lambda v=value: canonical_json(v), number=args.number, repeat=args.repeat)]
        slow = [t / args.number * 1e9 for t in timeit.repeat(
            lambda v=value: public(v), number=args.number, repeat=args.repeat)]
        d, p = statistics.median(fast), statistics.median(slow)
        direct_all.append(d)
        public_all.append(p)
        rows.append(f"| {name} | {d:,.0f} ns | {p:,.0f} ns | {p / d:.2f}× |")
    saved_us = (statistics.mean(public_all) - statistics.mean(direct_all)) * PER_CASE / 1000
    body = "\n".join([
        "## The C JSON encoder, called directly",
        "",
        (f"Machine: {machine()}. `python bench/encoders.py --repeat {args.repeat}`: median time"
        f" per encoding over {args.repeat} rounds of {args.number:,}; both ways write the same"
        " text (checked first)."),
        "",
        "| value | direct (`c_make_encoder`) | public (`JSONEncoder.encode`) | public / direct |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        (f"At {PER_CASE} encodings a case, the direct call saves about **{saved_us:.1f} µs per"
        " case**. Compare the per-case overhead of the engine in the scale section: that is"
        " why `oloproof._json` keeps this one private API (with a fallback to the public"
        " encoder where `c_make_encoder` is absent)."),
    ])
    write_section("encoders", body)
    record("encoders", [{
        "name": "C encoder called directly, saved per case", "value": saved_us, "unit": "µs",
        "note": "six encodings a case",
    }])
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
