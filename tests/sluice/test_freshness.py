"""Freshness from the run ledger (sluice.operations.freshness, no Spark): the age of the newest committed data against
the spec's warn_after / error_after, and the alert's one line."""

from __future__ import annotations

from datetime import UTC, datetime

from sluice.operations import ledger
from sluice.operations.freshness import check
from sluice.spec import load_spec
from tests.helpers import orders_spec, write_spec
from tests.sluice.test_backlog import _land
from tests.sluice.test_ledger import summary

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _spec(lake, **freshness):
    write_spec(lake.pipelines_dir, orders_spec(freshness={"warn_after": "2h", "error_after": "6h", **freshness}))
    return load_spec(lake.pipelines_dir / "orders.yaml")


def test_the_age_of_the_newest_committed_data_sets_the_level(lake):
    spec = _spec(lake)
    never = check(spec, lake, now=NOW)
    assert (never["level"], never["data_age_s"], never["last_run"]) == ("error", None, None)
    assert never["message"].startswith("sluice freshness ERROR: pipeline orders has committed no data yet, over "
                                       "its error_after of 6h; backlog: 0 files (0 B)")
    path = str(lake.ledger_path)
    ledger.append_run(path, summary("wrote", started="2026-11-26T08:30:00+00:00"))  # 3.5 h ago: warn
    # later runs that wrote nothing, or failed, or were dry: the data stays as old as it was
    ledger.append_run(path, summary("empty", started="2026-11-26T11:00:00+00:00", output_rows=0))
    ledger.append_run(path, summary("dry", started="2026-11-26T11:10:00+00:00", dry_run=True, mode="dry_run"))
    ledger.append_run(path, summary("broken", started="2026-11-26T11:30:00+00:00", status="failed", output_rows=0,
                                    error="Kafka broker unreachable at b:9092"))
    _land(lake.lake_root / "landing" / "orders", "late.json", '{"id": 1}\n' * 4)
    warn = check(spec, lake, now=NOW)
    assert (warn["level"], warn["data_age_s"], warn["run_age_s"]) == ("warn", 3.5 * 3600, 3600)
    assert warn["data_at"] == "2026-11-26T08:30:00+00:00"
    assert warn["last_run"] == {"run_id": "broken", "status": "failed", "error": "Kafka broker unreachable at b:9092",
                                "started_at": "2026-11-26T11:30:00+00:00"}
    assert warn["backlog"]["files"] == 1
    assert warn["message"] == (
        "sluice freshness WARN: pipeline orders last committed data 3.5 h ago (2026-11-26T08:30:00+00:00), over "
        "its warn_after of 2h; backlog: 1 files (40 B) since " + warn["backlog"]["oldest_at"]
        + "; last run broken failed: Kafka broker unreachable at b:9092")
    assert check(spec, lake, now=datetime(2026, 11, 26, 15, 0, tzinfo=UTC))["level"] == "error"  # 6.5 h
    assert check(spec, lake, now=datetime(2026, 11, 26, 9, 0, tzinfo=UTC))["level"] == "fresh"
    # without error_after, stale data stays a warning
    assert check(_spec(lake, error_after=None), lake, now=datetime(2026, 11, 27, tzinfo=UTC))["level"] == "warn"
