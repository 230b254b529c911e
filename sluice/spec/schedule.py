"""When a pipeline runs and what it answers for: its ``schedule:`` (cron, a preset, or upstream Assets), ``backfill:`` and ``freshness:``."""

from __future__ import annotations

import re

from pydantic import (
    field_validator,
    model_validator,
)

from sluice.spec.common import NAME_PATTERN, _Model, duration_seconds


class AssetSchedule(_Model):
    """Run when an upstream pipeline's table was updated (its Airflow Asset)."""

    asset: str | list[str]
    """The upstream pipeline(s) by name; with several, the run waits until each has been updated."""

    @property
    def pipelines(self) -> list[str]:
        return [self.asset] if isinstance(self.asset, str) else list(self.asset)

    @field_validator("asset")
    @classmethod
    def _names(cls, value: str | list[str]) -> str | list[str]:
        names = [value] if isinstance(value, str) else value
        if not names:
            raise ValueError("name at least one upstream pipeline")
        bad = [n for n in names if not re.match(NAME_PATTERN, n)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a pipeline name (lower-case letters, digits, _)")
        return value


_BACKFILL_PLACEHOLDER_RE = re.compile(r"\{\{\s*(\w+)\s*\}\}")
BACKFILL_PLACEHOLDERS = {"ds": "%Y-%m-%d", "ds_nodash": "%Y%m%d"}


class Freshness(_Model):
    """How old the pipeline's newest committed data may be before it is an alert (the ``sluice_freshness``
    DAG checks every pipeline that has this section; see docs/operations.md)."""

    warn_after: str
    """A duration (``30m``, ``2h``, ``1d``): older than this, the check warns (an alert, the task succeeds)."""
    error_after: str | None = None
    """A longer duration: older than this, the check alerts and its task fails."""
    notify: str | None = None
    """The Airflow connection the alert goes to: type ``http`` (a webhook: the alert is POSTed as JSON) or
    ``smtp`` (mail to its extra ``to``). Default: ``SLUICE_ALERT_CONN_ID``; neither: the task log only."""

    @field_validator("warn_after", "error_after")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_seconds(value)
        return value

    @model_validator(mode="after")
    def _order(self) -> Freshness:
        if self.error_after is not None and duration_seconds(self.error_after) <= duration_seconds(self.warn_after):
            raise ValueError(f"error_after ({self.error_after}) must be longer than warn_after ({self.warn_after})")
        return self


class Backfill(_Model):
    """How a backfill run rebuilds one slice (a range of days) of the sink table."""

    column: str
    """The sink column that holds a row's date (DATE, TIMESTAMP, or 'YYYY-MM-DD' STRING): the slice's rows
    are replaced (Delta replaceWhere on it). Best a ``sink.partition_by`` column."""
    path: str | None = None
    """File sources: the folder of ONE day's files, with ``{{ ds }}`` (2026-11-01) or ``{{ ds_nodash }}``
    (20261101), relative to the lake root or absolute, e.g. ``landing/orders/dt={{ ds }}``. Kafka sources
    have none: the slice is the records whose timestamp falls in it."""

    @field_validator("path")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return value
        names = _BACKFILL_PLACEHOLDER_RE.findall(value)
        unknown = sorted(set(names) - set(BACKFILL_PLACEHOLDERS))
        if unknown:
            raise ValueError(
                f"{value!r} uses {', '.join('{{ ' + n + ' }}' for n in unknown)}; the placeholders are "
                "{{ ds }} (2026-11-01) and {{ ds_nodash }} (20261101)"
            )
        if not names:
            raise ValueError(
                f"{value!r} has no {{{{ ds }}}}: every day of a backfill would read the same folder; write the "
                "folder of one day, e.g. landing/orders/dt={{ ds }}"
            )
        return value

    def path_for(self, day) -> str:
        """``path`` for one day (a ``datetime.date``)."""
        return _BACKFILL_PLACEHOLDER_RE.sub(lambda m: day.strftime(BACKFILL_PLACEHOLDERS[m.group(1)]), self.path or "")
