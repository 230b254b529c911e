"""A running Airflow for end-to-end tests: `airflow standalone` (api-server, scheduler, dag-processor,
triggerer on SQLite) with a home and a port of its own, and its REST API as the UI calls it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from devservices.kafka_broker import free_port
from devservices.readiness import http_json
from sluice.process import alive, descendants
from tests.e2e.conftest import BIN, wait_for


def airflow(env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "sluice"), "airflow", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@contextmanager
def airflow_standalone(tmp_path: Path, migrated_db: Path, overrides: dict[str, str] | None = None):
    """`sluice airflow standalone` with an Airflow home of its own, its metadata DB a copy of the run's migrated
    one (the ``airflow_db`` fixture: Airflow then finds nothing to migrate); yields (environment, log file).

    The maintenance and freshness DAGs are manual-only here (``SLUICE_*_SCHEDULE=none``): their scheduled runs
    would start spark-submits that no test asks for, beside the ones it measures; a test can ask for them.

    Leaving it is the test of `sluice airflow standalone`'s stop: SIGTERM to it alone, as a service manager sends
    it, must end every process it started (scheduler, API server, triggerer, DAG processor, their workers);
    whatever is left fails the test that started it (the UI, backfill, corrections and pool tests)."""
    port = free_port()
    home = tmp_path / "airflow-home"
    home.mkdir()
    shutil.copyfile(migrated_db, home / "airflow.db")
    env = {
        **os.environ,
        "SLUICE_AIRFLOW_HOME": str(home),
        "SLUICE_MAINTENANCE_SCHEDULE": "none",
        "SLUICE_FRESHNESS_SCHEDULE": "none",
        "AIRFLOW__API__PORT": str(port),
        # the log servers of the scheduler's workers and the triggerer listen on fixed ports (8793, 8794) unless
        # told: two standalones at once (two test workers) would fight over them
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        **(overrides or {}),
    }
    env.pop("AIRFLOW_HOME", None)
    log_path = tmp_path / "standalone.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([str(BIN / "sluice"), "airflow", "standalone"], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            yield env, log_path
        finally:
            survivors = stop_as_a_service_manager_would(process)
            for pid, _ in survivors:  # whatever a failed stop left (nothing, when it works)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        # after the clean-up, and only when the test itself passed: its own failure is reported first
        assert survivors == [], (f"`sluice airflow standalone` stopped with SIGTERM left {survivors} running",
                                 log_path.read_text(errors="replace")[-3000:])


def stop_as_a_service_manager_would(process: subprocess.Popen, timeout: float = 90):
    """SIGTERM to the `sluice airflow standalone` process alone (as systemd or a terminal's kill sends it),
    then wait until it and every process it started have ended; returns those still running (pid, command)."""
    tree = [process.pid, *descendants(process.pid)]
    process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.poll()
        if not [pid for pid in tree if alive(pid)]:
            break
        time.sleep(0.5)
    return [(pid, _command(pid)) for pid in tree if alive(pid)]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def standalone_credentials(env: dict[str, str]) -> tuple[str, str]:
    """The admin user and the password `airflow standalone` generated for it."""
    home = Path(env["SLUICE_AIRFLOW_HOME"])
    users = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text(encoding="utf-8"))
    return next(iter(users.items()))


class Api:
    """The Airflow REST API as the UI uses it: a token from the login endpoint, then JSON calls."""

    def __init__(self, env: dict[str, str], credentials: tuple[str, str] | None = None, token: str | None = None):
        self.base = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}"
        if token is None:
            username, password = credentials or standalone_credentials(env)
            token = self._call("POST", "/auth/token", {"username": username, "password": password})["access_token"]
        self.token = token

    @classmethod
    def connect(cls, env: dict[str, str], credentials: tuple[str, str] | None = None) -> Api | None:
        """Log in once the API server answers; None while it is starting (a readiness probe for ``wait_for``):
        the generated password file not written yet, or a half-started server's answer (see devservices.readiness)."""
        try:
            credentials = credentials or standalone_credentials(env)
        except (OSError, ValueError, StopIteration):  # not written yet, or half-written
            return None
        base = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}"
        answer = http_json(_request(base + "/auth/token", "POST", {"username": credentials[0],
                                                                   "password": credentials[1]}))
        return cls(env, token=answer["access_token"]) if isinstance(answer, dict) and "access_token" in answer else None

    def poll(self, path: str, not_yet_codes: tuple[int, ...] = ()) -> dict | None:
        """GET ``path``; None while the server answers like a half-started one (a 5xx, a reset, a half-written
        body; also the HTTP codes in ``not_yet_codes``, e.g. 404 for a DAG not parsed yet): for ``wait_for``."""
        return http_json(_request(self.base + path, "GET", token=self.token), timeout=60,
                         not_yet_codes=not_yet_codes)

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = _request(self.base + path, method, body, getattr(self, "token", None))
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            raise AssertionError(f"{method} {path}: HTTP {err.code}: {err.read()[:2000]!r}") from None

    def create_backfill(self, body: dict, timeout: float = 180) -> int:
        """POST /api/v2/backfills and return the backfill's id. On SQLite under load Airflow can answer 503
        ("Database is locked") with or without having created it (a retry then meets 409, "already a running
        backfill"): after such an answer, the DAG's running backfill is the one asked for, or none was made."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.post("/api/v2/backfills", body)["id"]
            except AssertionError as err:
                if "HTTP 503" not in str(err) and "HTTP 409" not in str(err) or time.monotonic() > deadline:
                    raise
            listed = self.poll(f"/api/v2/backfills?dag_id={body['dag_id']}") or {}
            running = [b for b in listed.get("backfills", []) if not b.get("completed_at")]
            if running:
                return running[0]["id"]
            time.sleep(2)

    def run_backfill(self, body: dict, what: str, timeout: float, log: Path) -> dict:
        """Create a backfill (``create_backfill``) and wait until it is complete; returns it as listed. On SQLite
        Airflow can roll a backfill back after answering with its id (a lock while it makes the runs, a failed
        commit): one that is no longer listed is posted again, as the dialog's user would."""
        state = {"id": self.create_backfill(body)}

        def completed() -> dict | None:
            listed = self.poll(f"/api/v2/backfills?dag_id={body['dag_id']}&limit=100")
            if listed is None:  # a busy server's answer: ask again
                return None
            found = {b["id"]: b for b in listed.get("backfills", [])}.get(state["id"])
            if found is None:
                state["id"] = self.create_backfill(body)
                return None
            return found if found.get("completed_at") else None

        return wait_for(what, completed, timeout, log, every=3)

    def get(self, path: str) -> dict:
        return self._call("GET", path)

    def run_summary(self, dag_id: str, run_id: str, task_id: str = "ingest") -> dict:
        """The run summary a task returned (its ``return_value`` XCom), decoded whether Airflow serves it as
        JSON text or as an object."""
        value = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
                         "return_value")["value"]
        return json.loads(value) if isinstance(value, str) else value

    def post(self, path: str, body: dict) -> dict:
        return self._call("POST", path, body)


def _request(url: str, method: str, body: dict | None = None, token: str | None = None) -> urllib.request.Request:
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    return request
