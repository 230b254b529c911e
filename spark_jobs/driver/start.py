"""A driver's first steps: the SparkSession starts on a thread of its own while the job's code is imported.

In a spark-submit driver the JVM is up before Python starts. Starting the SparkContext in it takes ~1.5 s of
the JVM's time, during which Python only waits on the gateway's socket; importing the job's code (the spec's and
summary's models, the run's modules: ~0.4 s) and reading its request need no JVM. So the entry points
(``run_pipeline.py``, ``maintain.py``) start the session first and import the rest beside it::

    prefer_installed_pyspark()
    session = start_session()          # pyspark's import here; the SparkContext on a thread
    from spark_jobs.run.runner import run_pipeline   # meanwhile
    main(argv, run_pipeline, session=session)         # waits for the session after reading the request

This module imports nothing of sluice's: the thread imports no module either, so no two threads ever import
at once (two threads importing modules that import each other can deadlock: Python then fails one import).
"""

from __future__ import annotations

import importlib
import importlib.util
import signal
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

# PySpark's test helpers: pyspark/sql/types.py (NumpyArrayConverter.can_convert) imports them on the first call
# into the JVM for their have_numpy flag
PYSPARK_TEST_HELPERS = "pyspark.testing.utils"


def prefer_installed_pyspark(path: list[str] = sys.path) -> None:
    """Import pyspark and py4j from the installed packages, not from the zips spark-submit puts first on
    ``sys.path``, when those zips are the installed pyspark's own copies (the same code): a package imports
    its byte-compiled modules, a zip is compiled from source at every start (~0.4 s of each run)."""
    own = [entry for entry in path if Path(entry).parent.parent.parent.name == "pyspark"
           and Path(entry).parent.parent.name == "python" and Path(entry).suffix == ".zip"
           and (Path(entry).parent.parent.parent.parent / "pyspark" / "__init__.py").is_file()]
    installed = {str(Path(entry).parent.parent.parent.parent) for entry in own}
    if own and any(entry in installed for entry in path):
        path[:] = [entry for entry in path if entry not in own] + own


def answer_numpy_check(modules: dict[str, Any] = sys.modules) -> None:
    """Spare the driver PySpark's test helpers (~0.3 s of its start).

    PySpark passes every argument of a call into the JVM through its converters, and one of them
    (``NumpyArrayConverter.can_convert`` in pyspark/sql/types.py) imports ``pyspark.testing.utils`` for its
    ``have_numpy`` flag. That module is PySpark's test helpers: importing it imports pandas, pyarrow's compute
    functions, unittest and protobuf, which a run never uses. The driver registers a module of that name that
    holds ``have_numpy``, computed as PySpark computes it; any other name read from it loads PySpark's real
    module and answers from it (PEP 562), so code that does use the helpers gets them."""
    if PYSPARK_TEST_HELPERS in modules:
        return
    stand_in = types.ModuleType(PYSPARK_TEST_HELPERS, answer_numpy_check.__doc__)
    stand_in.have_numpy = importlib.util.find_spec("numpy") is not None  # pyspark.testing.utils.have_package

    def __getattr__(name: str) -> Any:  # noqa: N807 - a module's attribute hook (PEP 562)
        if name.startswith("__") and name.endswith("__"):  # the import system asks for __path__ and the like
            raise AttributeError(name)
        if modules.get(PYSPARK_TEST_HELPERS) is stand_in:
            del modules[PYSPARK_TEST_HELPERS]
        return getattr(importlib.import_module(PYSPARK_TEST_HELPERS), name)

    stand_in.__getattr__ = __getattr__
    modules[PYSPARK_TEST_HELPERS] = stand_in


class SessionStart:
    """The driver's SparkSession (the one spark-submit configured: master, jars, conf, ``--name``), started
    on a thread. :meth:`wait` gives it (or raises what its start raised); :meth:`seconds` is how long the
    start took, whoever waited."""

    def __init__(self) -> None:
        from pyspark.sql import SparkSession  # before the thread: it imports nothing

        self._builder = SparkSession.builder
        self._session: Any = None
        self._error: BaseException | None = None
        self._began = time.monotonic()
        self._ended: float | None = None
        self._thread = threading.Thread(target=self._start, name="sluice-session-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._session = self._builder.getOrCreate()
        except BaseException as err:  # noqa: BLE001 - handed to whoever waits (wait() raises it)
            self._error = err
        finally:
            self._ended = time.monotonic()

    def wait(self) -> Any:
        """The started session; what its start raised, raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        if threading.current_thread() is threading.main_thread():
            interrupt_cancels_jobs(self._session)
        return self._session

    @property
    def seconds(self) -> float:
        """The session's start, from the thread's start to the session (0 while it is starting)."""
        return round((self._ended or self._began) - self._began, 3)

    def discard(self) -> None:
        """The job will not run (a bad request or spec): wait for the start to end and stop the session."""
        self._thread.join()
        if self._session is not None:
            self._session.stop()


def interrupt_cancels_jobs(spark: Any) -> None:
    """What PySpark's SparkContext does when made on the main thread, for one made on another: Ctrl-C (SIGINT)
    cancels the running Spark jobs, then interrupts Python (pyspark/core/context.py, its ``signal_handler``)."""
    context = spark.sparkContext

    def cancel(_signum: int, _frame: Any) -> None:
        try:
            context.cancelAllJobs()
        finally:
            raise KeyboardInterrupt()

    signal.signal(signal.SIGINT, cancel)


def start_session() -> SessionStart:
    """The driver's session, starting: PySpark's test helpers spared (:func:`answer_numpy_check`), then the
    SparkContext on a thread of its own."""
    answer_numpy_check()
    return SessionStart()
