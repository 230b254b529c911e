"""What one run is asked to do, validated before any JVM starts.

Three entry points ask: the DAG's params (the "Trigger DAG" form), ``sluice run``'s options, and an Airflow
backfill run (``airflow backfill create``, the UI's backfill dialog), whose data interval is the slice to
rebuild. All of them go through :func:`run_request`, so an invalid combination fails the same way
everywhere, with a message naming the param (or option) and the fix -- before spark-submit starts.

Imports neither Airflow nor PySpark.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from sluice.spec import KafkaSource, PipelineSpec

RUN_MODES = ("incremental", "dry_run", "backfill", "reset")
TRIGGERS = ("available_now", "once")


class RunRequestError(ValueError):
    """An invalid run request; the message names the param or option and what to do."""


@dataclass(frozen=True)
class BackfillSlice:
    """The part of the sink a backfill run rebuilds: rows whose ``backfill.column`` is in [start, end)."""

    start: datetime
    end: datetime

    @property
    def whole_days(self) -> bool:
        return _midnight(self.start) and _midnight(self.end)

    def days(self) -> list[date]:
        """The calendar days the slice touches (UTC), first to last."""
        last = (self.end - timedelta(microseconds=1)).date()
        day, days = self.start.date(), []
        while day <= last:
            days.append(day)
            day += timedelta(days=1)
        return days

    @property
    def label(self) -> str:
        """``2026-11-01..2026-11-03`` for whole days (last day inclusive), else the ISO interval."""
        if self.whole_days:
            return f"{self.start.date().isoformat()}..{(self.end - timedelta(days=1)).date().isoformat()}"
        return f"{self.start.isoformat()}/{self.end.isoformat()}"

    def args(self) -> list[str]:
        return ["--backfill-start", self.start.isoformat(), "--backfill-end", self.end.isoformat()]

    @classmethod
    def from_args(cls, start: str, end: str) -> BackfillSlice:
        return cls(_utc(datetime.fromisoformat(start)), _utc(datetime.fromisoformat(end)))


@dataclass(frozen=True)
class RunRequest:
    mode: str
    trigger: str
    dry_run: bool = False
    max_files_per_trigger: int | None = None
    max_offsets_per_trigger: int | None = None
    backfill: BackfillSlice | None = None

    @property
    def reset(self) -> bool:
        return self.mode == "reset" and not self.dry_run


# how each entry point names the fields in its messages
PARAM_NAMES = {
    "mode": "param mode", "trigger": "param trigger", "max_files_per_trigger": "param max_files_per_trigger",
    "max_offsets_per_trigger": "param max_offsets_per_trigger", "backfill_from": "param backfill_from",
    "backfill_to": "param backfill_to",
}
CLI_NAMES = {
    "mode": "the run mode", "trigger": "--trigger", "max_files_per_trigger": "--max-files-per-trigger",
    "max_offsets_per_trigger": "--max-offsets-per-trigger", "backfill_from": "--backfill-from",
    "backfill_to": "--backfill-to",
}


def run_request(
    spec: PipelineSpec,
    *,
    mode: Any = "incremental",
    trigger: Any = None,
    max_files_per_trigger: Any = None,
    max_offsets_per_trigger: Any = None,
    backfill_from: Any = None,
    backfill_to: Any = None,
    test_mode: bool = False,
    backfill_interval: tuple[datetime, datetime] | None = None,
    names: dict[str, str] = PARAM_NAMES,  # noqa: B006 - read only
) -> RunRequest:
    """Validate one run's request against the spec.

    ``test_mode``: ``airflow tasks test`` (or ``--dry-run``) makes any run a dry run.
    ``backfill_interval``: the data interval of an Airflow *backfill* run; such a run rebuilds that slice.
    """
    mode = "incremental" if mode in (None, "") else mode
    if mode not in RUN_MODES:
        raise RunRequestError(f"{names['mode']}: {mode!r} is not allowed; use one of: {', '.join(RUN_MODES)}")
    trigger = spec.trigger if trigger in (None, "") else trigger
    if trigger not in TRIGGERS:
        raise RunRequestError(f"{names['trigger']}: {trigger!r} is not allowed; use one of: {', '.join(TRIGGERS)}")
    max_files = _positive(max_files_per_trigger, names["max_files_per_trigger"])
    max_offsets = _positive(max_offsets_per_trigger, names["max_offsets_per_trigger"])
    kafka = isinstance(spec.source, KafkaSource)
    if max_files is not None and kafka:
        raise RunRequestError(
            f"{names['max_files_per_trigger']}: {spec.name} reads Kafka, which has no files; "
            f"use {names['max_offsets_per_trigger']} to limit the records per micro-batch"
        )
    if max_offsets is not None and not kafka:
        raise RunRequestError(
            f"{names['max_offsets_per_trigger']}: {spec.name} reads {spec.source.format} files, not Kafka; "
            f"use {names['max_files_per_trigger']} to limit the files per micro-batch"
        )
    limit = names["max_files_per_trigger"] if max_files is not None else names["max_offsets_per_trigger"]
    if trigger == "once" and (max_files or max_offsets):
        raise RunRequestError(
            f"{limit}: trigger once reads everything new in ONE micro-batch and ignores rate limits; "
            "use trigger available_now (as many micro-batches as the limit needs), or leave the limit empty"
        )
    start, end = _day(backfill_from, names["backfill_from"]), _day(backfill_to, names["backfill_to"])
    if backfill_interval is not None and mode not in ("incremental", "backfill", "dry_run"):
        raise RunRequestError(
            f"{names['mode']}: {mode!r} in an Airflow backfill run; a backfill run rebuilds its data interval's "
            "slice of the table: leave mode at incremental (or backfill)"
        )
    if backfill_interval is not None and mode != "dry_run":
        mode = "backfill"
    if mode != "backfill" and (start or end) and backfill_interval is None:
        given = names["backfill_from"] if start else names["backfill_to"]
        raise RunRequestError(f"{given}: only used with mode backfill (this run's mode is {mode}); "
                              "set mode to backfill, or clear the range")
    dry_run = test_mode or mode == "dry_run"
    slice_ = None
    if mode == "backfill" or (backfill_interval is not None):
        if spec.backfill is None:
            raise RunRequestError(
                f"{names['mode']}: backfill: pipeline {spec.name} has no backfill section in its spec, so a "
                "backfill has nothing it could rebuild (an incremental run ingests what is new, whatever the "
                "date). Add to the spec:  backfill: {column: <the sink's date column>, path: "
                "'<folder of one day, with {{ ds }}>'}  -- or run it in mode incremental"
            )
        if max_files or max_offsets:
            raise RunRequestError(f"{limit}: rate limits apply to the stream; a backfill reads its slice in one batch. "
                                  "Leave it empty")
        slice_ = _slice(start, end, backfill_interval, names)
    return RunRequest(mode="backfill" if slice_ is not None else mode, trigger=trigger, dry_run=dry_run,
                      max_files_per_trigger=max_files, max_offsets_per_trigger=max_offsets, backfill=slice_)


def _slice(start: date | None, end: date | None, interval, names) -> BackfillSlice:
    if start is None and end is None:
        if interval is None:
            raise RunRequestError(
                f"{names['backfill_from']}, {names['backfill_to']}: mode backfill needs the days to rebuild "
                "(YYYY-MM-DD, both inclusive), or an Airflow backfill run (airflow backfill create, or the "
                "UI's backfill dialog), whose data interval is the slice"
            )
        begin, finish = (_utc(v) for v in interval)
        if finish <= begin:
            raise RunRequestError(f"the run's data interval {begin.isoformat()} .. {finish.isoformat()} is empty; "
                                  "a backfill needs a schedule with a data interval (e.g. @daily)")
        return BackfillSlice(begin, finish)
    if start is None or end is None:
        missing = names["backfill_from"] if start is None else names["backfill_to"]
        raise RunRequestError(f"{missing}: required too; a backfill range has a first and a last day (YYYY-MM-DD)")
    if end < start:
        raise RunRequestError(
            f"{names['backfill_to']}: {end.isoformat()} is before {names['backfill_from']} {start.isoformat()}"
        )
    return BackfillSlice(datetime.combine(start, time(), timezone.utc),
                         datetime.combine(end + timedelta(days=1), time(), timezone.utc))


def _positive(value: Any, name: str) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RunRequestError(f"{name}: {value!r} is not a whole number; give a number >= 1, or leave it empty")
    try:
        number = int(value)
    except ValueError:
        raise RunRequestError(f"{name}: {value!r} is not a whole number; give a number >= 1, or leave it empty") from None
    if number < 1:
        raise RunRequestError(f"{name}: {number} is not allowed; give a number >= 1, or leave it empty")
    return number


def _day(value: Any, name: str) -> date | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise RunRequestError(f"{name}: {value!r} is not a date; write it as YYYY-MM-DD, e.g. 2026-11-01") from None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _midnight(value: datetime) -> bool:
    return value.time() == time() and value.tzinfo is not None
