"""The Spark connection sluice submits through must exist (see sluice.launch.environment for the one the project
defines)."""

from __future__ import annotations


class SparkConnectionMissing(RuntimeError):
    """The Airflow connection naming the Spark master does not exist."""


def require_spark_connection(conn_id: str) -> None:
    """Fail with instructions if ``conn_id`` is not defined.

    SparkSubmitHook logs "Could not load connection string" and submits to master=yarn when the
    connection is missing, which on a laptop hangs or fails far from the cause.
    """
    from airflow.sdk.bases.hook import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        env = f"AIRFLOW_CONN_{conn_id.upper()}"
        raise SparkConnectionMissing(
            f"Airflow connection {conn_id!r} is not defined, so sluice does not know the Spark master "
            f"(the provider would silently fall back to master=yarn). Define it, e.g. "
            f"`sluice airflow connections add {conn_id} --conn-type spark --conn-host 'local[*]'`, or set "
            f"{env}='{{\"conn_type\": \"spark\", \"host\": \"local[*]\"}}' (the `sluice airflow` and make "
            f"targets set it for you; SLUICE_SPARK_CONN_ID names another connection)."
        ) from None
