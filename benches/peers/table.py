"""Nearest-rank percentiles and Markdown rows shared by the peer scripts, in the same shape as
the Rust suite's `stats.rs`: `| name | n | min | P50 | P99 | max |`, values in milliseconds."""

import math


def pct(sorted_v, p):
    """Nearest-rank percentile `p` (0..100) of already sorted values; NaN when empty."""
    if not sorted_v:
        return float("nan")
    rank = math.ceil(p / 100 * len(sorted_v))
    return sorted_v[min(max(rank, 1), len(sorted_v)) - 1]


def row(name, v):
    """One Markdown row of the distribution of `v`."""
    v = sorted(v)
    if not v:
        return f"| {name} | 0 | | | | |"
    return f"| {name} | {len(v)} | {v[0]:.3f} | {pct(v, 50):.3f} | {pct(v, 99):.3f} | {v[-1]:.3f} |"
