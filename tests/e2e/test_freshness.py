"""Freshness alerts through real Airflow (`airflow dags test` of the sluice_freshness DAG): a stale
pipeline's alert reaches a local webhook and a local SMTP server, naming pipeline, age, backlog and the last
run's error; past error_after the task fails; a fresh pipeline sends nothing."""

from __future__ import annotations

import json
import threading
import warnings
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devservices.kafka_broker import free_port
from sluice.operations import ledger
from tests.e2e.conftest import sluice
from tests.helpers import orders_spec, write_spec
from tests.sluice.test_backlog import _land
from tests.sluice.test_ledger import summary


@pytest.fixture
def webhook():
    """A local HTTP receiver: the JSON body of every POST, by path."""
    received: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server API
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, json.loads(body)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], received
    server.shutdown()


@pytest.fixture
def mailbox():
    """A local SMTP server (the standard library's, Python 3.11): every message it takes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import asyncore
        import smtpd
    messages: list[tuple[str, list[str], str]] = []

    class Box(smtpd.SMTPServer):
        def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):
            messages.append((mailfrom, rcpttos, data.decode() if isinstance(data, bytes) else data))

    port = free_port()
    box = Box(("127.0.0.1", port), None)
    threading.Thread(target=asyncore.loop, kwargs={"timeout": 0.2}, daemon=True).start()
    yield port, messages
    box.close()


def _ago(**delta) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat(timespec="seconds")


def test_stale_pipelines_alert_by_webhook_and_mail_and_a_fresh_one_does_not(lake, airflow_db, monkeypatch,
                                                                             webhook, mailbox):
    port, received = webhook
    smtp_port, messages = mailbox
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_ALERTS", json.dumps(
        {"conn_type": "http", "host": "127.0.0.1", "port": port, "extra": {"endpoint": "/alerts"}}))
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_MAIL", json.dumps(
        {"conn_type": "smtp", "host": "127.0.0.1", "port": smtp_port, "extra": {"to": "oncall@example.com"}}))
    monkeypatch.setenv("SLUICE_ALERT_CONN_ID", "sluice_alerts")
    for name, freshness in (("stale", {"warn_after": "1h", "error_after": "4h"}),
                            ("late", {"warn_after": "1h", "error_after": "1d", "notify": "sluice_mail"}),
                            ("fresh", {"warn_after": "1h"})):
        write_spec(lake.pipelines_dir, orders_spec(name=name, freshness=freshness,
                                                   source={"format": "json", "path": f"landing/{name}",
                                                           "schema": "id BIGINT"}))
    path = str(lake.ledger_path)
    ledger.append_run(path, summary("s1", pipeline="stale", started=_ago(hours=5)))
    ledger.append_run(path, summary("s2", pipeline="stale", started=_ago(minutes=10), status="failed",
                                    output_rows=0, error="spark-submit exited with code 1: disk full"))
    ledger.append_run(path, summary("l1", pipeline="late", started=_ago(hours=2)))
    ledger.append_run(path, summary("f1", pipeline="fresh", started=_ago(minutes=5)))
    _land(lake.lake_root / "landing" / "stale", "waiting.json", '{"id": 1}\n' * 2)

    # one `airflow dags test` of the freshness DAG: its tasks, one per pipeline, run side by side in one process
    done = sluice("airflow", "dags", "test", "sluice_freshness")
    output = done.stdout + done.stderr
    states = task_states("sluice_freshness")
    # past error_after: the alert goes out, then the task fails; past warn_after only: an alert, and the task
    # succeeds; fresh: nothing sent, and the task succeeds
    assert states == {"freshness_stale": "failed", "freshness_late": "success", "freshness_fresh": "success"}, (
        states, output[-3000:])
    [(where, alert)] = received
    assert where == "/alerts"
    assert (alert["pipeline"], alert["level"], alert["warn_after"], alert["error_after"]) == ("stale", "error", "1h", "4h")
    assert 5 * 3600 - 120 <= alert["data_age_s"] <= 5 * 3600 + 600
    assert (alert["backlog"]["source"], alert["backlog"]["files"]) == ("files", 1)
    assert alert["last_run"]["error"] == "spark-submit exited with code 1: disk full"
    # the age in the message is the alert's own data_age_s (bounded above), whenever the task got to run:
    # "5.0 h" itself would need the task to start within 3 minutes of the ledger row, a bet under load
    assert alert["message"].startswith("sluice freshness ERROR: pipeline stale last committed data "
                                       f"{alert['data_age_s'] / 3600:.1f} h ago ("), alert["message"]
    assert "backlog: 1 files (20 B)" in alert["message"] and "last run s2 failed: spark-submit exited" in alert["message"]
    assert "sluice freshness ERROR: pipeline stale" in output
    # the warning by mail, the spec's own connection; the webhook took only the error
    [(sender, recipients, mail)] = messages
    assert recipients == ["oncall@example.com"] and sender.startswith("sluice@")
    assert "Subject: [sluice] warn: late is not fresh" in mail
    assert "sluice freshness WARN: pipeline late last committed data 2." in mail
    assert "sluice freshness FRESH: pipeline fresh last committed data" in output


def task_states(dag_id: str) -> dict[str, str]:
    """Each task's state in the DAG's latest run, from the Airflow DB the test's processes share."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(TaskInstance.task_id, TaskInstance.state, TaskInstance.run_id).filter(
            TaskInstance.dag_id == dag_id).all()
    latest = max(run_id for _, _, run_id in rows)
    return {task: str(state.value if hasattr(state, "value") else state) for task, state, run_id in rows
            if run_id == latest}
