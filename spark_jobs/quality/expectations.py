"""Expectations (``expectations:`` in a spec): per rule, which rows violate it, what the batch does about it.

A rule is a SQL predicate a good row satisfies; a row where it is false or null violates it. By
``on_violation``: ``warn`` counts, ``drop`` leaves the row out, ``quarantine`` moves it to the quarantine table
(a row violating both kinds goes there), ``fail`` refuses the whole batch before anything is written."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sluice.spec import Expectation
from spark_jobs.driver.errors import BatchRejected
from spark_jobs.quality.quarantine import clip, row_json


def violations(expectations: list[Expectation]) -> tuple[dict[str, Column], Column, Column]:
    """Per expectation, whether a row violates it; whether the row goes to the quarantine; whether it is
    dropped (a row violating both kinds goes to the quarantine)."""
    violated = {e.name: ~F.coalesce(F.expr(e.rule), F.lit(False)) for e in expectations}
    quarantine_flag = _any(violated[e.name] for e in expectations if e.on_violation == "quarantine")
    drop_flag = _any(violated[e.name] for e in expectations if e.on_violation == "drop") & ~quarantine_flag
    return violated, quarantine_flag, drop_flag


def quarantine_reason(expectations: list[Expectation], violated: dict[str, Column]) -> tuple[Column, Column]:
    """A quarantined row's ``error`` and ``expectation`` columns: the names of the rules it violates."""
    names = F.concat_ws(", ", *[F.when(violated[e.name], F.lit(e.name)) for e in expectations
                                if e.on_violation == "quarantine"])
    return F.concat(F.lit("expectation(s) violated: "), names), names


def count_violations(rows: DataFrame, expectations: list[Expectation], batch_id: int,
                     stats: dict[str, Any]) -> Any:
    """Counts the batch's violations into ``stats`` (``expectations``, ``dropped_rows``, ``quarantined_rows``)
    and returns the counts' row (``__dropped``, ``__quarantined`` and one per rule); refuses the batch
    (:class:`BatchRejected`) when a ``fail`` rule is violated."""
    violated, quarantine_flag, drop_flag = violations(expectations)
    counts = rows.agg(
        *[F.count(F.when(violated[e.name], 1)).alias(e.name) for e in expectations],
        F.count(F.when(drop_flag, 1)).alias("__dropped"),
        F.count(F.when(quarantine_flag, 1)).alias("__quarantined"),
    ).first()
    stats["expectations"] = {
        e.name: {"rule": e.rule, "on_violation": e.on_violation, "violations": counts[e.name]} for e in expectations
    }
    for e in expectations:
        if e.on_violation == "fail" and counts[e.name]:
            example = rows.where(violated[e.name]).select(row_json(rows)).first()[0]
            raise BatchRejected(
                f"expectation {e.name} ({e.rule}) failed for {counts[e.name]} row(s) of batch {batch_id}, e.g. "
                f"{clip(example)}; on_violation: fail. Nothing of the batch was written and the checkpoint did "
                "not advance: fix the data or the rule and run again (the same batch is processed again), or "
                "choose on_violation: warn, drop or quarantine."
            )
    stats["dropped_rows"] += counts["__dropped"]
    stats["quarantined_rows"] += counts["__quarantined"]
    return counts


def _any(flags) -> Column:
    result = F.lit(False)
    for flag in flags:
        result = result | flag
    return result
