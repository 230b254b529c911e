"""One-line warnings about a run's data quality, for the Airflow task log and ``sluice run``'s stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice.contract import RunSummary


def quality_warnings(summary: RunSummary) -> list[str]:
    """What a person should look at after this run: quarantined, dropped and rescued records, a change to the
    table's schema and rescued values moved into new columns, expectations."""
    found = []
    name, run_id = summary.pipeline, summary.run_id
    quarantined = summary.quarantined_rows
    if quarantined:
        where = summary.quarantine
        found.append(
            f"{name}: {quarantined} record(s) quarantined (bad records or expectations) in {where}; "
            f"see them with: SELECT * FROM delta.`{where}` WHERE run_id = '{run_id}'"
        )
    dropped = summary.dropped_rows
    if dropped:
        found.append(f"{name}: {dropped} record(s) dropped by on_bad_records: drop or an expectation's drop; "
                     "counted here, not kept anywhere")
    rescued = summary.rescued_rows
    if rescued:
        found.append(f"{name}: {rescued} record(s) had fields the schema does not declare, kept in the _rescued "
                     "column: add them to source.schema (the next run adds the columns and moves the kept values "
                     "into them), or set schema_evolution: add_columns")
    overwritten = summary.overwritten_files or {}
    if overwritten.get("count"):
        count, paths = overwritten["count"], ", ".join(overwritten["paths"])
        more = f" and {count - len(overwritten['paths'])} more" if count > len(overwritten["paths"]) else ""
        if overwritten.get("action") == "reingest":
            found.append(f"{name}: {count} landing file(s) rewritten after they were ingested: {paths}{more}; their "
                         "new content is ingested as new input (source.on_overwrite: reingest; an append sink keeps "
                         "the old rows too)")
        else:
            found.append(f"{name}: {count} landing file(s) rewritten after they were ingested, their new content "
                         f"NOT ingested: {paths}{more}. Options: source.on_overwrite: reingest (each new version "
                         "ingested once; a merge sink with keys replaces the old rows) or fail (stop the pipeline "
                         "until it is looked at); land corrections under a new file name")
    change = summary.schema_change
    if change:
        what = "; ".join(
            [f"added column {c['column']} {c['type']}" for c in change.get("added_columns", [])]
            + [f"widened {c['column']} {c['from']} -> {c['to']}" for c in change.get("widened_columns", [])])
        when = ("" if change.get("applied") else
                " -- not yet: the stateful query ran no batch, its next batch makes the change")
        found.append(f"{name}: schema of {change.get('table')}: {what}{when}")
    for column, entry in (summary.promoted_rescued or {}).items():
        kept = entry.get("kept_in_rescued") or 0
        found.append(f"{name}: {entry.get('rows', 0)} row(s) had {column} in _rescued: moved into the column {column}"
                     + (f"; {kept} value(s) do not fit its type and stay in _rescued" if kept else ""))
    for expectation, entry in summary.expectations.items():
        if entry.get("violations") and entry.get("on_violation") == "warn":
            found.append(f"{name}: expectation {expectation} ({entry['rule']}) violated by {entry['violations']} "
                         "row(s), kept (on_violation: warn)")
    return found
