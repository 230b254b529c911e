"""A failure in one line: what the run summary's ``error`` says."""

from __future__ import annotations


def describe_error(err: BaseException) -> str:
    """The error's first line, and its root cause's when that is another one: Spark wraps the cause
    (a Kafka data-loss check, a schema mismatch) in generic "task failed" / "query terminated" errors. An
    object store that stopped answering during the run is named first (:func:`store_unreachable`)."""
    text = _describe(err)
    return store_unreachable(text) or disk_full(text) or text


STORE_PLACES = ("s3a://", "s3://", "S3A", "AWS Error", "endpoint URL", "amazonaws")
"""Words that put a failed connection on the object store (and not on, say, a Kafka broker)."""
CONNECTION_FAILED = ("Connection refused", "connect timed out", "Connect timed out", "UnknownHostException",
                     "Unable to execute HTTP request", "Couldn't connect to server", "NETWORK_CONNECTION",
                     "Could not connect to the endpoint URL", "Connection reset", "error sending request")


def store_unreachable(text: str) -> str | None:
    """``text`` (a failure's description) said as the object store not answering, when it is one: a failed
    connection to the store's endpoint, from S3A (Spark, Delta), Arrow (the checkpoint), boto3 (the lock) or
    delta-rs (the ledger). None for anything else."""
    from sluice.storage.object_store import ObjectStore

    store = ObjectStore.from_env()
    places = STORE_PLACES + ((store.endpoint.split("://")[-1],) if store.endpoint else ())
    if not any(mark in text for mark in CONNECTION_FAILED) or not any(place in text for place in places):
        return None
    return (f"object store unreachable at {store.where} during the run: {text} -- start the store (or fix "
            "AWS_ENDPOINT_URL) and run again: nothing after the last committed batch was kept, and the next "
            "run resumes from the checkpoint, exactly once")


NO_SPACE = ("No space left on device", "os error 28", "ENOSPC", "Disk quota exceeded")


def disk_full(text: str) -> str | None:
    """``text`` (a failure's description) said as a full disk first, when it is one (Java's, Python's and
    delta-rs' wording of ENOSPC, or a quota): the place it was writing when the wording names it, and what to
    do. None for anything else."""
    if not any(mark in text for mark in NO_SPACE):
        return None
    import re

    place = re.search(r"(?:writing rows to|writing to|to file|creating|file:)\s*((?:file:|s3a?://)?/[^\s,;:()]+)", text)
    where = f" while writing {place.group(1).rstrip('.')}" if place else ""
    return (f"no space left on device{where}: free space on that disk (or point SLUICE_LAKE_ROOT / "
            "SLUICE_CHECKPOINT_ROOT at one that has it) and run again: nothing after the last committed batch "
            f"was kept, and the next run resumes from the checkpoint, exactly once. The error: {text}")


def _describe(err: BaseException) -> str:
    java = getattr(err, "java_exception", None)
    if java is not None:
        # a Py4JJavaError (a failed Spark action inside a micro-batch): its str() is only "An error occurred
        # while calling o123.collectToPython"; the JVM exception and its root cause say what went wrong
        headline = _first_line(str(java.toString())) or type(err).__name__
        root = java
        while root.getCause() is not None:
            root = root.getCause()
        message = " ".join(str(root.toString()).split())
        return headline if message in headline else f"{headline} Caused by: {message}"
    headline = _first_line(getattr(err, "desc", None) or str(err)) or type(err).__name__
    root, cause = None, getattr(err, "_cause", None)
    while cause is not None:
        root, cause = cause, getattr(cause, "_cause", None)
    if root is not None:
        message = " ".join((getattr(root, "desc", None) or str(root)).split())
        if message and message not in headline:
            return f"{headline} Caused by: {message}"
    return headline


def _first_line(text: str) -> str:
    text = (text or "").strip()
    return text.splitlines()[0] if text else ""


class GuardRefused(RuntimeError):
    """The run would lose or duplicate data; nothing was written. The message gives the options."""


class BackfillRefused(GuardRefused):
    """The backfill cannot run as asked; nothing was written. The message says why and what to do."""


class BatchRejected(RuntimeError):
    """The batch must not be committed (bad records with ``fail``, an expectation that fails, new fields with
    ``schema_evolution: fail``, a parquet file of another schema). The message says what and how to go on."""
