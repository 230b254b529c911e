"""A run's request (DAG params, `sluice run` options, an Airflow backfill run) is validated before Spark."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from sluice.contract.request import (
    CLI_NAMES,
    BackfillSlice,
    RunRequestError,
    run_request,
)
from sluice.spec import parse_spec

FILES = {"name": "orders", "source": {"format": "json", "path": "landing/orders", "schema": "id BIGINT, d DATE"}}
KAFKA = {"name": "clicks", "source": {"format": "kafka", "bootstrap_servers": "127.0.0.1:9092", "topics": ["c"]}}
BACKFILL = {"backfill": {"column": "d", "path": "landing/orders/dt={{ ds }}"}}


def spec(base=FILES, **extra):
    return parse_spec({**base, **extra})


def test_defaults_are_an_incremental_run_with_the_spec_trigger():
    request = run_request(spec(trigger="once"))
    assert (request.mode, request.trigger, request.dry_run, request.backfill) == ("incremental", "once", False, None)


def test_rate_limits_are_numbers_for_their_own_source_kind():
    assert run_request(spec(), max_files_per_trigger="5").max_files_per_trigger == 5
    assert run_request(spec(KAFKA), max_offsets_per_trigger=1000).max_offsets_per_trigger == 1000
    with pytest.raises(RunRequestError, match=r"^param max_files_per_trigger: clicks reads Kafka, which has no files; "
                                              r"use param max_offsets_per_trigger"):
        run_request(spec(KAFKA), max_files_per_trigger=2)
    with pytest.raises(RunRequestError, match=r"^param max_offsets_per_trigger: orders reads json files, not Kafka"):
        run_request(spec(), max_offsets_per_trigger=2)
    with pytest.raises(RunRequestError, match=r"^param max_files_per_trigger: 0 is not allowed; give a number >= 1"):
        run_request(spec(), max_files_per_trigger=0)
    with pytest.raises(RunRequestError, match=r"^--max-files-per-trigger: 'ten' is not a whole number"):
        run_request(spec(), max_files_per_trigger="ten", names=CLI_NAMES)


def test_trigger_once_ignores_rate_limits_so_the_combination_is_refused():
    with pytest.raises(RunRequestError, match=r"^param max_files_per_trigger: trigger once reads everything new in "
                                              r"ONE micro-batch and ignores "
                                              r"rate limits; use trigger available_now"):
        run_request(spec(), trigger="once", max_files_per_trigger=3)


def test_unknown_mode_and_trigger_name_what_is_allowed():
    with pytest.raises(RunRequestError, match=r"^param mode: 'full' is not allowed; use one of: incremental, dry_run, "
                                              r"backfill, reset$"):
        run_request(spec(), mode="full")
    with pytest.raises(RunRequestError, match=r"^param trigger: 'always' is not allowed"):
        run_request(spec(), trigger="always")


def test_a_backfill_range_is_whole_days_both_inclusive():
    request = run_request(spec(**BACKFILL), mode="backfill", backfill_from="2026-11-01", backfill_to="2026-11-03")
    assert request.mode == "backfill"
    assert request.backfill == BackfillSlice(datetime(2026, 11, 1, tzinfo=timezone.utc),
                                             datetime(2026, 11, 4, tzinfo=timezone.utc))
    assert request.backfill.label == "2026-11-01..2026-11-03"
    assert request.backfill.days() == [date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mode": "backfill"}, r"param backfill_from, param backfill_to: mode backfill needs the days to rebuild"),
    ({"mode": "backfill", "backfill_from": "2026-11-01"}, r"^param backfill_to: required too"),
    ({"mode": "backfill", "backfill_from": "2026-11-03", "backfill_to": "2026-11-01"},
     r"^param backfill_to: 2026-11-01 is before param backfill_from 2026-11-03$"),
    ({"mode": "backfill", "backfill_from": "1 Nov", "backfill_to": "2026-11-01"},
     r"^param backfill_from: '1 Nov' is not a date; write it as YYYY-MM-DD"),
    ({"mode": "incremental", "backfill_from": "2026-11-01"}, r"^param backfill_from: only used with mode backfill"),
    ({"mode": "backfill", "backfill_from": "2026-11-01", "backfill_to": "2026-11-01", "max_files_per_trigger": 2},
     r"rate limits apply to the stream; a backfill reads its slice in one batch"),
])
def test_invalid_backfill_requests_fail_before_spark(kwargs, message):
    with pytest.raises(RunRequestError, match=message):
        run_request(spec(**BACKFILL), **kwargs)


def test_a_pipeline_without_a_backfill_section_refuses_backfills():
    with pytest.raises(RunRequestError, match=r"^param mode: backfill: pipeline orders has no backfill section"):
        run_request(spec(), mode="backfill", backfill_from="2026-11-01", backfill_to="2026-11-01")
    interval = (datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc))
    with pytest.raises(RunRequestError, match=r"has no backfill section"):
        run_request(spec(), backfill_interval=interval)


def test_an_airflow_backfill_run_rebuilds_its_data_interval():
    interval = (datetime(2026, 11, 2, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc))
    request = run_request(spec(**BACKFILL), backfill_interval=interval)
    assert (request.mode, request.backfill.label) == ("backfill", "2026-11-02..2026-11-02")
    dry = run_request(spec(**BACKFILL), backfill_interval=interval, test_mode=True)
    assert (dry.mode, dry.dry_run, dry.backfill.label) == ("backfill", True, "2026-11-02..2026-11-02")
    with pytest.raises(RunRequestError, match=r"^param mode: 'reset' in an Airflow backfill run"):
        run_request(spec(**BACKFILL), mode="reset", backfill_interval=interval)


def test_backfill_slice_travels_as_iso_arguments():
    slice_ = BackfillSlice(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, 6, tzinfo=timezone.utc))
    assert BackfillSlice.from_args(*slice_.args()[1::2]) == slice_
    assert not slice_.whole_days
    assert slice_.label == "2026-11-01T00:00:00+00:00/2026-11-02T06:00:00+00:00"


@pytest.mark.parametrize(("backfill", "message"), [
    ({"column": "d"}, r"backfill.path: required for file sources: the folder of one day's files, with \{\{ ds \}\}"),
    ({"column": "d", "path": "landing/orders"}, r"backfill.path: 'landing/orders' has no \{\{ ds \}\}"),
    ({"column": "d", "path": "x/{{ month }}"}, r"backfill.path: 'x/\{\{ month \}\}' uses \{\{ month \}\}"),
])
def test_backfill_section_is_validated_with_the_spec(backfill, message):
    from sluice.spec import SpecError

    with pytest.raises(SpecError, match=message):
        spec(backfill=backfill)


def test_kafka_backfill_has_no_path_and_complete_sinks_have_no_slices():
    from sluice.spec import SpecError

    assert spec(KAFKA, backfill={"column": "day"}).backfill.column == "day"
    with pytest.raises(SpecError, match=r"backfill.path: a Kafka source has no folders"):
        spec(KAFKA, backfill={"column": "day", "path": "x/{{ ds }}"})
    with pytest.raises(SpecError, match=r"backfill: a complete sink rewrites the whole table on every run"):
        spec(transform={"sql": "SELECT d, count(*) n FROM source GROUP BY d"}, sink={"mode": "complete"},
             backfill={"column": "d", "path": "landing/orders/dt={{ ds }}"})


def test_a_delta_source_backfill_has_no_path():
    from sluice.spec import SpecError

    delta = {"name": "silver", "source": {"format": "delta", "pipeline": "orders"}}
    assert spec(delta, backfill={"column": "day"}).backfill.column == "day"
    with pytest.raises(SpecError, match=r"backfill.path: a delta source has no folders; a slice is the upstream "
                                        r"table's rows whose day falls in it"):
        spec(delta, backfill={"column": "day", "path": "x/{{ ds }}"})
