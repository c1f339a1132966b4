"""Plain-text tables printed whole, however wide or long (no pandas elision)."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

Format = Union[str, Callable[[Any], str], None]
# (header, key, format) of one column.
Column = tuple[str, str, Format]


def cell(value: Any, fmt: Format = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if callable(fmt):
        return fmt(value)
    if fmt:
        try:
            return format(value, fmt)
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[Column], indent: str = "  ", rule_before: Optional[set[int]] = None
) -> str:
    """``columns``: (header, key, format) triples; a key missing from a row prints ``-``.
    Text columns are left-aligned, the others right-aligned. ``rule_before`` holds row
    indices above which a dashed line is drawn (e.g. before a summary row)."""
    rows = list(rows)
    body = [[cell(r.get(key), fmt) for _, key, fmt in columns] for r in rows]
    heads = [h for h, _, _ in columns]
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(heads)]
    numeric = [all(isinstance(r.get(k), (int, float)) or r.get(k) is None for r in rows) and any(r.get(k) is not None for r in rows) for _, k, _ in columns]

    def line(cells: Sequence[str]) -> str:
        return indent + "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    out = [line(heads)]
    for i, b in enumerate(body):
        if rule_before and i in rule_before:
            out.append(indent + "-" * (sum(widths) + 2 * (len(widths) - 1)))
        out.append(line(b))
    return "\n".join(out)
