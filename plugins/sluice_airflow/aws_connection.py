"""Object storage credentials from an Airflow connection of the Amazon provider's ``aws`` type.

When ``SLUICE_AWS_CONN_ID`` names a connection, a task resolves it (Airflow's secrets backends, the metadata DB
or an ``AIRFLOW_CONN_*`` variable) into the standard AWS variables that every client sluice uses reads
(:mod:`sluice.storage.object_store`): the lock and the bucket check in the task, and the spark-submit it starts (its
environment, never its command line). The fields, as the Amazon provider reads them:

* login / password: the access key id and the secret access key;
* extra ``endpoint_url`` (or ``service_config.s3.endpoint_url``): an S3-compatible store's endpoint;
* extra ``region_name``; extra ``aws_session_token``.

Without ``SLUICE_AWS_CONN_ID`` the task's own environment (the AWS variables, an instance profile) stands.
"""

from __future__ import annotations

import os


class AwsConnectionError(RuntimeError):
    pass


def aws_env(conn_id: str | None) -> dict[str, str]:
    """The AWS variables the connection ``conn_id`` describes (empty without one)."""
    if not conn_id:
        return {}
    from airflow.sdk.bases.hook import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise AwsConnectionError(
            f"SLUICE_AWS_CONN_ID: Airflow connection {conn_id!r} is not defined. Add it (login = access key id, "
            f"password = secret access key, extra endpoint_url / region_name), e.g. `sluice airflow connections "
            f"add {conn_id} --conn-type aws --conn-login KEY --conn-password SECRET --conn-extra "
            "'{\"endpoint_url\": \"http://127.0.0.1:8333\", \"region_name\": \"us-east-1\"}'`, or unset "
            "SLUICE_AWS_CONN_ID to use the AWS variables of the environment"
        ) from None
    extra = conn.extra_dejson
    endpoint = extra.get("endpoint_url") or ((extra.get("service_config") or {}).get("s3") or {}).get("endpoint_url")
    found = {"AWS_ACCESS_KEY_ID": conn.login, "AWS_SECRET_ACCESS_KEY": conn.password,
             "AWS_SESSION_TOKEN": extra.get("aws_session_token"), "AWS_ENDPOINT_URL": endpoint,
             "AWS_REGION": extra.get("region_name")}
    return {key: str(value) for key, value in found.items() if value}


def use_aws_connection(conn_id: str | None) -> dict[str, str]:
    """Put the connection's AWS variables in this task process's environment (its clients and the
    spark-submit it starts read them there); returns them."""
    found = aws_env(conn_id)
    os.environ.update(found)
    return found
