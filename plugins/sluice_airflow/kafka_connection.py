"""Kafka brokers and security settings from an Airflow connection, handed to Spark out of sight.

A spec's ``source.connection`` names the connection. Its host (and port) are the brokers; a login and
password become a SASL JAAS config (PLAIN by default, SCRAM with extra ``sasl.mechanism``); every extra
key with a dot is a Kafka client property as it is (``security.protocol``, ``ssl.truststore.location``,
``ssl.truststore.password``, ...). The settings travel to the Spark driver in one environment variable of
the spark-submit process, never on its command line, so they appear in no task log, XCom or process list.
"""

from __future__ import annotations

import base64
import json

from sluice.contract import KAFKA_SECRET_ENV
from sluice.spec import KafkaSource, PipelineSpec

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaConnectionError(RuntimeError):
    pass


def kafka_client_config(conn_id: str) -> dict[str, str]:
    """The Kafka client properties an Airflow connection describes."""
    from airflow.sdk.bases.hook import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise KafkaConnectionError(
            f"source.connection: Airflow connection {conn_id!r} is not defined. Add it (host = the brokers, "
            f"login/password for SASL, extra for security.protocol and other client settings), e.g. "
            f"`sluice airflow connections add {conn_id} --conn-type kafka --conn-host 127.0.0.1 --conn-port 9092`, "
            "or set source.bootstrap_servers instead"
        ) from None
    extra = conn.extra_dejson
    config = {key: str(value) for key, value in extra.items() if "." in key}
    if conn.host:
        hosts = conn.host
        config["bootstrap.servers"] = f"{hosts}:{conn.port}" if conn.port and ":" not in hosts else hosts
    if conn.login:
        mechanism = config.setdefault("sasl.mechanism", "PLAIN")
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise KafkaConnectionError(
                f"connection {conn_id!r}: sasl.mechanism {mechanism!r} is not supported with login/password; "
                f"use one of {', '.join(_LOGIN_MODULES)}, or put your own sasl.jaas.config in extra"
            )
        config.setdefault("security.protocol", "SASL_SSL")
        config["sasl.jaas.config"] = (
            f'{module} required username="{_escape(conn.login)}" password="{_escape(conn.password or "")}";'
        )
    return config


def kafka_secret_env(spec: PipelineSpec) -> dict[str, str]:
    """The spark-submit environment entry carrying the spec's Kafka connection, if it names one."""
    source = spec.source
    if not isinstance(source, KafkaSource) or not source.connection:
        return {}
    config = kafka_client_config(source.connection)
    # base64: no spaces, so even where a value did reach a log line, Airflow's mask of KEY=value
    # pairs whose key says "secret" covers all of it
    encoded = base64.b64encode(json.dumps(config).encode()).decode()
    return {KAFKA_SECRET_ENV: encoded}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
