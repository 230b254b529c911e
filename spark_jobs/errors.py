"""A failure in one line: what the run summary's ``error`` says."""

from __future__ import annotations


def describe_error(err: BaseException) -> str:
    """The error's first line, and its root cause's when that is another one: Spark wraps the cause
    (a Kafka data-loss check, a schema mismatch) in generic "task failed" / "query terminated" errors."""
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
