"""Readiness waits against a real HTTP server on 127.0.0.1 that starts the way a busy machine's services do:
garbage first (an empty body, not JSON, a 503, a connection closed mid-answer or reset), the real answer later.
The wait succeeds at the real answer; a service that never gets there fails at the deadline, naming the
service and the end of its log."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import struct
import threading
import time
import urllib.error
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from devservices.kafka_broker import free_port
from devservices.readiness import (
    NotReady,
    http_answer,
    http_json,
    launch_server,
    wait_until,
)
from devservices.stack import Ports, Stack, StackError
from sluice.process import ServerState, alive
from sluice.settings import load_settings

WORKERS = {"workers": [{"id": "worker-1", "state": "ALIVE"}]}


def _send(handler: BaseHTTPRequestHandler, code: int, body: bytes, length: int | None = None) -> None:
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)


def _reset(handler: BaseHTTPRequestHandler) -> None:
    """Close with an RST instead of a FIN (linger 0): the client's read raises ConnectionResetError."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()


ANSWERS = {
    "empty body": lambda h: _send(h, 200, b""),
    "not json": lambda h: _send(h, 200, b"not json"),
    "half-written json": lambda h: _send(h, 200, b'{"workers": [{"st'),
    "503": lambda h: h.send_error(503, "Service Unavailable"),
    "404": lambda h: h.send_error(404, "Not Found"),
    # promises 200 bytes, sends 12, closes: IncompleteRead
    "closed mid-answer": lambda h: _send(h, 200, b'{"workers": ', length=200),
    # closes before any status line: RemoteDisconnected
    "closed before answering": lambda h: None,
    "reset": lambda h: _reset(h),
    "ready": lambda h: _send(h, 200, json.dumps(WORKERS).encode()),
}


class StubService:
    """An HTTP server whose n-th request gets the n-th answer of ``script`` (the last one from then on)."""

    def __init__(self, script: list[str]):
        self.script = script
        self.served: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                answer = stub.script[min(len(stub.served), len(stub.script) - 1)]
                stub.served.append(answer)
                ANSWERS[answer](self)

            def log_message(self, *args):  # keep pytest's output for failures
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/json/"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> StubService:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


GARBAGE = ["empty body", "not json", "half-written json", "503", "closed mid-answer", "closed before answering",
           "reset"]


def test_each_half_started_answer_is_not_yet_and_the_real_one_is_returned():
    with StubService([*GARBAGE, "ready"]) as stub:
        answers = [http_json(stub.url, timeout=2) for _ in range(len(GARBAGE) + 1)]
    assert stub.served == [*GARBAGE, "ready"]
    assert answers == [None] * len(GARBAGE) + [WORKERS]


def test_refused_and_timed_out_connections_are_not_yet():
    assert http_json(f"http://127.0.0.1:{free_port()}/json/", timeout=2) is None  # nothing listens: refused
    with socket.socket() as silent:  # accepts (the backlog does) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        started = time.monotonic()
        assert http_json(f"http://127.0.0.1:{silent.getsockname()[1]}/", timeout=0.5) is None
        assert time.monotonic() - started < 30  # its 0.5 s timeout, not a hang (a generous bound)


def test_the_wait_for_the_spark_worker_outlasts_garbage_and_returns_at_the_real_answer(tmp_path):
    # Given the Spark master's UI answering garbage before its JSON, as on a busy machine (issue 18: `sluice stack
    # up` crashed with JSONDecodeError here)
    stack = Stack(load_settings(), Ports())
    # (and, seen in a CI run, a 404 from its Jetty before the page's handlers are attached)
    with StubService(["404", *GARBAGE, "ready"]) as stub:
        stack.ports = Ports(spark_master_ui=stub.server.server_address[1])
        # When the stack waits for the worker's registration, Then it returns once the real answer came
        stack._wait("the Spark worker's registration", stack._worker_registered, 10, "spark-worker.log", every=0.05)
    assert stub.served == ["404", *GARBAGE, "ready"]


def test_a_service_that_never_gets_ready_fails_at_its_deadline_naming_it_and_the_end_of_its_log(tmp_path):
    log = tmp_path / "spark-master.log"
    log.write_text("starting the master\n" + "filler\n" * 2000 + "java.net.BindException: Address already in use\n")
    with StubService(["503", "not json", "reset", "empty body"]) as stub:
        started = time.monotonic()
        with pytest.raises(NotReady) as caught:
            wait_until("the Spark master's UI", lambda: http_json(stub.url, timeout=1), 2, log, every=0.1)
        waited = time.monotonic() - started
    message = str(caught.value)
    assert message.startswith(f"timed out after 2 s waiting for the Spark master's UI; see {log}, which ends:\n")
    assert message.endswith("java.net.BindException: Address already in use\n")
    assert "starting the master" not in message  # the tail, not the whole log
    assert waited >= 2  # not before its deadline
    assert len(stub.served) >= 2  # it kept asking


def test_the_stack_names_the_service_and_its_log_when_the_deadline_passes(tmp_path):
    stack = Stack(load_settings(), Ports())
    stack.logs = tmp_path
    (tmp_path / "airflow-scheduler.log").write_text("ERROR - the scheduler's heartbeat is late\n")
    with StubService(["503"]) as stub:
        with pytest.raises(StackError, match=r"timed out after 1 s waiting for the Airflow scheduler; see "
                                             r".*airflow-scheduler\.log, which ends:\nERROR - the scheduler's "
                                             r"heartbeat is late\n$"):
            stack._wait("the Airflow scheduler", lambda: stack._http_ok(stub.url), 1, "airflow-scheduler.log")


def test_a_2xx_with_an_empty_body_is_an_answer_for_a_health_check():
    # the Airflow scheduler's /health answers 200 with no body
    with StubService(["503", "empty body"]) as stub:
        assert [http_answer(stub.url, timeout=2) for _ in range(2)] == [None, b""]


def test_a_4xx_or_a_failing_probe_fails_at_once_not_at_the_deadline():
    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api/v2/dags/missing"
    try:
        with pytest.raises(urllib.error.HTTPError, match="404"):  # a wrong URL does not get better by waiting
            wait_until("a wrong URL", lambda: http_json(url, timeout=2), 60)
        assert http_json(url, timeout=2, not_yet_codes=(404,)) is None  # unless the caller says it may

        def exited():
            raise RuntimeError("the broker exited with code 1")

        with pytest.raises(RuntimeError, match="exited with code 1"):
            wait_until("a broker", exited, 60)
    finally:
        server.shutdown()
        server.server_close()


@dataclasses.dataclass
class _Server(ServerState):
    stopped: list[int] = dataclasses.field(default_factory=list)

    def stop(self) -> None:
        self.stopped.append(self.pid)


def test_a_server_that_exits_while_starting_fails_at_once_with_its_log_and_is_stopped(tmp_path):
    server = _Server(tmp_path)
    log = tmp_path / "server.log"
    command = ["bash", "-c", "echo 'address already in use: 9092' >&2; exit 3"]
    began = time.monotonic()
    with pytest.raises(NotReady) as caught:
        launch_server(server, command, "the test server", "answer", lambda: False, 120, log, error=NotReady,
                      stop=_Server.stop)
    assert time.monotonic() - began < 60  # not at the 120 s deadline: its process exited
    assert str(caught.value).startswith("the test server exited with code 3")
    assert "address already in use: 9092" in str(caught.value)  # the end of its log, which got its output
    assert server.stopped == [server.pid] and server.pid is not None
    assert (tmp_path / "state.json").is_file()  # its pid was remembered before the wait


def test_a_server_that_comes_up_is_returned_running_with_its_pid_saved(tmp_path):
    server = _Server(tmp_path)
    marker = tmp_path / "up"
    command = ["bash", "-c", f"sleep 1; touch {marker}; exec sleep 60"]
    try:
        got = launch_server(server, command, "the test server", "answer", marker.exists, 120,
                            tmp_path / "server.log", output=tmp_path / "stdout.log", error=NotReady,
                            stop=_Server.stop)
        assert got is server and alive(server.pid) and server.stopped == []
        assert json.loads((tmp_path / "state.json").read_text())["pid"] == server.pid
        assert _Server.load(tmp_path).pid == server.pid
    finally:
        if server.pid:
            os.killpg(server.pid, signal.SIGKILL)
