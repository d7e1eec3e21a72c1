"""The port's statistics, in the shape of hipify's --print-stats: references
converted and not converted, by category and by name; unknown identifiers
counted as unconverted (hipify ignores names it does not know); lines
changed; kernels translated, verified and failed."""

from __future__ import annotations

from collections import Counter

from .table import CATEGORIES


def build(converted: Counter, unconverted: Counter, unknown: Counter, changed_lines: int, total_lines: int,
          kernels: list, verified: dict[str, bool] | None = None) -> dict:
    conv_total = sum(converted.values())
    unconv_total = sum(unconverted.values())
    by_cat_conv = {c: 0 for c in CATEGORIES}
    by_cat_unconv = {c: 0 for c in (*CATEGORIES, "unknown")}
    for (cat, _), n in converted.items():
        by_cat_conv[cat] = by_cat_conv.get(cat, 0) + n
    for (cat, _), n in unconverted.items():
        by_cat_unconv[cat] = by_cat_unconv.get(cat, 0) + n
    verified = verified or {}
    translated = sum(1 for k in kernels if k.translated)
    return {
        "converted": {"total": conv_total, "by_category": by_cat_conv,
                      "by_name": dict(sorted(Counter({n: c for (_, n), c in converted.items()}).items()))},
        "unconverted": {"total": unconv_total, "by_category": by_cat_unconv,
                        "by_name": dict(sorted(Counter({n: c for (_, n), c in unconverted.items()}).items())),
                        "unknown": dict(sorted(unknown.items()))},
        "conversion_percent": round(100.0 * conv_total / (conv_total + unconv_total), 1)
        if conv_total + unconv_total else 100.0,
        "lines_changed": changed_lines,
        "lines_total": total_lines,
        "kernels": {"found": len(kernels), "translated": translated,
                    "verified": sum(1 for k in kernels if verified.get(k.spelling) is True),
                    "failed": sum(1 for k in kernels if not k.translated or verified.get(k.spelling) is False),
                    "not_verified": sum(1 for k in kernels if k.translated and k.spelling not in verified)},
    }


def text(stats: dict, filename: str) -> str:
    """hipify's --print-stats layout."""
    c, u, k = stats["converted"], stats["unconverted"], stats["kernels"]
    lines = [f"[metal-kernel port] statistics of '{filename}':",
             f"  CONVERTED refs count: {c['total']}",
             f"  UNCONVERTED refs count: {u['total']} (unknown identifiers: {sum(u['unknown'].values())})",
             f"  CONVERSION %: {stats['conversion_percent']}",
             f"  CHANGED lines of code: {stats['lines_changed']}",
             f"  TOTAL lines of code: {stats['lines_total']}",
             f"  KERNELS found: {k['found']}, translated: {k['translated']}, verified: {k['verified']}, "
             f"failed: {k['failed']}, not verified: {k['not_verified']}",
             "[metal-kernel port] CONVERTED refs by category:"]
    lines += [f"  {cat}: {n}" for cat, n in c["by_category"].items() if n]
    if u["total"]:
        lines.append("[metal-kernel port] UNCONVERTED refs by category:")
        lines += [f"  {cat}: {n}" for cat, n in u["by_category"].items() if n]
    lines.append("[metal-kernel port] CONVERTED refs by name:")
    lines += [f"  {name}: {n}" for name, n in c["by_name"].items()]
    if u["by_name"]:
        lines.append("[metal-kernel port] UNCONVERTED refs by name:")
        lines += [f"  {name}: {n}" for name, n in u["by_name"].items()]
    return "\n".join(lines)
