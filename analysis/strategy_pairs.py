"""Which best form improves which naive form: the one table the docs blocks, the figures and
the report share (docs/methodology.md, "Naive and best forms").

memory_strategies/registry.cpp names, for every best form, the naive form it improves
(`improves`); `memstrat list --json` and every record's config carry it. A record's
config.improves wins where present (`pairs_from_records`); for records without it IMPROVES is
the one place to update when a best form is added.

This module imports nothing from analysis/, so that any module can use it.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

IMPROVES: dict[str, str] = {"zero-copy-staged": "zero-copy",
                            "um-prefetch-coarse": "um-prefetch",
                            "pinned-graph": "pinned",
                            "double-buffer-graph": "double-buffer"}


def pairs_from_records(records: Iterable[Mapping[str, Any]],
                       base: Mapping[str, str] = IMPROVES) -> dict[str, str]:
    """Best form -> naive form: `base`, overridden by config.improves in the records."""
    pairs = dict(base)
    for r in records:
        cfg = r.get("config") or {}
        if cfg.get("improves") and cfg.get("strategy"):
            pairs[cfg["strategy"]] = cfg["improves"]
    return pairs


def naive_form(strategy: str, pairs: Mapping[str, str] = IMPROVES) -> str:
    """The naive form of `strategy` (itself when it is a naive form)."""
    return pairs.get(strategy, strategy)


def is_best_form(strategy: str, pairs: Mapping[str, str] = IMPROVES) -> bool:
    return strategy in pairs
