"""Waiting for a service that is starting: every half-started answer is "not yet", only the deadline fails.

A service on its way up answers in every broken way before it answers right, the more so on a busy machine:
the port refuses or resets the connection, the HTTP server closes mid-answer or answers 5xx, a JSON endpoint
sends an empty or half-written body. Each of these is "not yet". Only the deadline turns waiting into an
error, and that error names the service and shows the end of its log (where the reason is).

One loop for every readiness wait of the project (``sluice stack``, the Kafka broker, the tests' Airflow):
:func:`wait_until` polls a probe that returns something truthy when the service is ready; :func:`http_json`
is the probe of an HTTP JSON endpoint.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sluice.process import log_tail

T = TypeVar("T")

NOT_YET_ERRORS: tuple[type[Exception], ...] = (OSError, http.client.HTTPException, ValueError)
"""What a half-started service's answer raises: ``OSError`` (refused or reset connection, ``URLError``, a
timeout), ``http.client.HTTPException`` (``RemoteDisconnected``, ``IncompleteRead``, a garbled status line),
``ValueError`` (``JSONDecodeError``, a body that is not UTF-8). Anything else is a bug, not a wait."""


class NotReady(RuntimeError):
    """A service did not become ready by its deadline; the message names it and ends with its log's tail."""


def wait_until(what: str, probe: Callable[[], T | None], timeout: float, log_path: Path | None = None, *,
               every: float = 1.0, error: type[Exception] = NotReady) -> T:
    """Call ``probe`` until it returns something truthy, and return that. A falsy answer (``None``, ``False``)
    is "not yet": the probe turns a half-started answer into one (see :func:`http_json`); an exception it
    raises is not caught, so a probe can fail at once (the service's process exited, a wrong URL). After
    ``timeout`` seconds: ``error`` naming ``what`` and the end of ``log_path``."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        left = deadline - time.monotonic()
        if left <= 0:
            raise error(f"timed out after {timeout:.0f} s waiting for {what}{log_tail(log_path)}")
        time.sleep(min(every, left))


def launch_server(server, command: list[str], what: str, until: str, ready: Callable[[], bool], timeout: float,
                 log: Path, *, error: type[Exception], stop: Callable[[Any], None], output: Path | None = None,
                 cwd: Path | None = None):
    """Start a local server's ``command`` in a session of its own (its output appended to ``output``, by
    default ``log``), remember its pid in ``server`` (a :class:`sluice.process.ServerState`), and wait until
    ``ready()`` says it does ``until`` ("answer"). Its process exiting ends the wait at once; the exit or the
    deadline raise ``error`` naming ``what`` with the end of ``log``, after ``stop(server)``."""
    with (output or log).open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=cwd, start_new_session=True)
    server.pid = process.pid
    server.save()

    def serves() -> bool:
        if process.poll() is not None:  # waiting longer cannot help
            raise error(f"{what} exited with code {process.returncode}{log_tail(log)}")
        return ready()

    try:
        wait_until(f"{what} to {until}", serves, timeout, log, every=0.5, error=error)
    except error:
        stop(server)
        raise
    return server


def http_answer(url: str | urllib.request.Request, timeout: float = 5, not_yet_codes: tuple[int, ...] = ()
                ) -> bytes | None:
    """The whole body of a 2xx answer from ``url`` (a URL or a ``Request``; ``b""`` is an answer), or ``None``
    while the service is not ready: any of :data:`NOT_YET_ERRORS` (refused, reset, closed mid-answer, timed
    out) or an HTTP 5xx. An HTTP 4xx is raised (``urllib.error.HTTPError``): a wrong URL or credentials do not
    get better by waiting -- unless its code is in ``not_yet_codes`` (a 404 for a DAG the dag-processor has
    not parsed yet)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as err:
        err.close()
        if err.code >= 500 or err.code in not_yet_codes:
            return None
        raise
    except NOT_YET_ERRORS:
        return None


def http_json(url: str | urllib.request.Request, timeout: float = 5, not_yet_codes: tuple[int, ...] = ()) -> Any:
    """The parsed JSON body of a 2xx answer (see :func:`http_answer`), or ``None`` while the service is not
    ready -- an empty, half-written or non-JSON body included."""
    body = http_answer(url, timeout, not_yet_codes)
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:  # JSONDecodeError, or a body that is not UTF-8
        return None
