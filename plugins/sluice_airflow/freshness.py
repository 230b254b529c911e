"""Freshness alerts: the ``sluice_freshness`` DAG's task per pipeline with a ``freshness:`` section.

Each run of the DAG (every 15 minutes by default, ``SLUICE_FRESHNESS_SCHEDULE``) checks each such pipeline
(:func:`sluice.operations.freshness.check`: the age of its newest committed data, from the run ledger) and, when it is
older than ``warn_after``, sends the alert -- pipeline, age, backlog, the last run's error -- to the Airflow
connection the spec's ``freshness.notify`` (or ``SLUICE_ALERT_CONN_ID``) names:

* type ``http`` / ``https``: a webhook; the alert is POSTed as JSON to ``host:port`` + extra ``endpoint``
  (extra ``headers`` are sent too);
* type ``smtp``: a mail from extra ``from`` to extra ``to`` (a list or a comma-separated text), through
  ``host:port`` (login/password when set, extra ``starttls``).

Older than ``error_after``, the task fails after sending it, so the DAG run shows red. A fresh pipeline: no
alert. Why a check DAG and not a Deadline Alert: Airflow's deadlines measure a DAG run (queued, started),
not the age of data a pipeline wrote -- a run that succeeds every hour with a broken source never misses
one. The check reads the ledger like ``sluice status``: no Spark job.
"""

from __future__ import annotations

import json
import smtplib
import urllib.request
from collections.abc import Sequence
from email.message import EmailMessage
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from sluice.operations.freshness import check
from sluice.settings import load_settings
from sluice.spec import load_spec
from sluice.spec.catalog import resolve_upstream


class AlertNotSent(AirflowException):
    """The alert could not be delivered; the message names the connection and why."""


def send_alert(conn_id: str, found: dict[str, Any], *, timeout: float = 10.0) -> str:
    """Deliver the alert ``found`` through the Airflow connection ``conn_id``; returns where it went."""
    from airflow.sdk.bases.hook import BaseHook

    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson
    kind = (conn.conn_type or "").lower()
    if kind in ("http", "https"):
        scheme = "https" if kind == "https" or conn.schema == "https" else "http"
        endpoint = str(extra.get("endpoint") or "/")
        url = f"{scheme}://{conn.host}{f':{conn.port}' if conn.port else ''}/{endpoint.lstrip('/')}"
        request = urllib.request.Request(url, data=json.dumps(found).encode(), method="POST",
                                         headers={"Content-Type": "application/json", **(extra.get("headers") or {})})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                answer.read()
        except OSError as err:
            raise AlertNotSent(f"the freshness alert of {found['pipeline']} could not be POSTed to {url} "
                               f"(connection {conn_id!r}): {err}") from None
        return url
    if kind in ("smtp", "email"):
        to = extra.get("to") or []
        to = [t.strip() for t in to.split(",")] if isinstance(to, str) else list(to)
        if not to:
            raise AlertNotSent(f"connection {conn_id!r} (smtp) names no recipient: set its extra \"to\"")
        mail = EmailMessage()
        mail["Subject"] = f"[sluice] {found['level']}: {found['pipeline']} is not fresh"
        mail["From"] = extra.get("from") or f"sluice@{conn.host or 'localhost'}"
        mail["To"] = ", ".join(to)
        mail.set_content(found["message"] + "\n\n" + json.dumps(found, indent=2, default=str))
        try:
            with smtplib.SMTP(conn.host or "localhost", conn.port or 25, timeout=timeout) as smtp:
                if extra.get("starttls"):
                    smtp.starttls()
                if conn.login:
                    smtp.login(conn.login, conn.password or "")
                smtp.send_message(mail)
        except (OSError, smtplib.SMTPException) as err:
            raise AlertNotSent(f"the freshness alert of {found['pipeline']} could not be mailed through "
                               f"{conn.host}:{conn.port} (connection {conn_id!r}): {err}") from None
        return f"mail to {', '.join(to)}"
    raise AlertNotSent(f"connection {conn_id!r} is of type {conn.conn_type!r}: freshness alerts go to an http(s) "
                       "webhook or an smtp server")


class SluiceFreshnessOperator(BaseOperator):
    """Check the freshness of the pipeline of ``spec_path``; alert when it is stale; fail past ``error_after``.
    Its XCom value is the check (level, ages, backlog, last run)."""

    template_fields: Sequence[str] = ("spec_path",)
    ui_color = "#f5d79a"

    def __init__(self, *, spec_path: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec_path = spec_path

    def execute(self, context: Any) -> dict[str, Any]:
        settings = load_settings()
        spec = resolve_upstream(load_spec(self.spec_path), settings)
        found = check(spec, settings)
        self.log.info("%s", found["message"])
        if found["level"] != "fresh":
            conn_id = spec.freshness.notify or settings.alert_conn_id
            if conn_id:
                found["alerted"] = send_alert(conn_id, found)
                self.log.info("alert sent to %s", found["alerted"])
            else:
                self.log.warning("no alert connection: set freshness.notify in the spec or SLUICE_ALERT_CONN_ID")
        if found["level"] == "error":
            raise AirflowException(found["message"])
        return found
