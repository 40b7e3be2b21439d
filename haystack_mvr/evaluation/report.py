"""Markdown tables of metric dicts: rank-cutoff metrics (fractions internally) are printed as percentages."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

# Every metric whose name ends in "@k" (gold_R@5, answer_R@20, MRR@10, nDCG@10, Recall@100, view3_R@5,
# overall_R@20, answer_view_R@100) is a fraction in [0, 1] and is printed as a percentage, as the papers do.
# Diagnostics without a cutoff (LV, PPL, KL) are printed as they are.
_PERCENT_METRIC = re.compile(r"@\d+$")


def is_percent_metric(name: str) -> bool:
    """Whether ``name`` is a rank-cutoff metric (ends in ``@k``), stored as a fraction and shown in percent."""
    return bool(_PERCENT_METRIC.search(name))


def format_value(name: str, value: float | None, *, digits: int = 1, raw_digits: int = 3) -> str:
    """
    One table cell: ``100 * value`` with ``digits`` decimals for ``@k`` metrics, else ``value`` with ``raw_digits``.

    Example:
        >>> format_value("gold_R@5", 0.8768), format_value("PPL", 3.1934)
        ('87.7', '3.193')
    """
    if value is None or math.isnan(value):
        return "-"
    if is_percent_metric(name):
        return f"{100.0 * value:.{digits}f}"
    return f"{value:.{raw_digits}f}"


def markdown_table(
    results: Mapping[str, Mapping[str, float]] | Mapping[str, float],
    *,
    metrics: Sequence[str] | None = None,
    digits: int = 1,
    raw_digits: int = 3,
    system_header: str = "system",
) -> str:
    """
    Format one system's metrics, or several systems', as a GitHub markdown table (one row per system).

    :param results: ``{system: {metric: value}}``, or a single ``{metric: value}`` dict (one row, system ``""``).
    :param metrics: Columns, in order; default every metric in first-seen order. Missing values print ``-``.
    :param digits: Decimals of the percentages (``@k`` metrics, stored as fractions).
    :param raw_digits: Decimals of the other values (LV, PPL, ...).
    :param system_header: Header of the first column.
    :returns: The table, ending with a newline.

    Example:
        >>> print(markdown_table({"BM25": {"gold_R@1": 0.793, "gold_R@5": 0.932}}), end="")
        | system | gold_R@1 | gold_R@5 |
        |---|---:|---:|
        | BM25 | 79.3 | 93.2 |
    """
    if results and not any(isinstance(v, Mapping) for v in results.values()):
        rows: dict[str, Mapping[str, float]] = {"": results}  # type: ignore[dict-item]
    else:
        rows = dict(results)  # type: ignore[arg-type]
    if metrics is None:
        metrics = list(dict.fromkeys(name for row in rows.values() for name in row))
    lines = [
        "| " + " | ".join([system_header, *metrics]) + " |",
        "|---|" + "---:|" * len(metrics),
    ]
    for system, row in rows.items():
        cells = [format_value(m, row.get(m), digits=digits, raw_digits=raw_digits) for m in metrics]
        lines.append("| " + " | ".join([system, *cells]) + " |")
    return "\n".join(lines) + "\n"
