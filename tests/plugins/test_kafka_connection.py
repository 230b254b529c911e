"""Kafka settings from an Airflow connection: brokers, SASL from login/password, extras as client settings."""

from __future__ import annotations

import base64
import json

import pytest
from sluice_airflow.kafka_connection import (
    KafkaConnectionError,
    kafka_client_config,
    kafka_secret_env,
)

from sluice.contract import KAFKA_SECRET_ENV
from tests.helpers import make_spec


def test_connection_with_login_becomes_a_sasl_jaas_config(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", json.dumps({
        "conn_type": "kafka", "host": "b1:9093,b2:9093", "login": "alice", "password": 'pa"ss',
        "extra": {"security.protocol": "SASL_PLAINTEXT", "ssl.endpoint.identification.algorithm": "",
                  "not_a_client_setting": "x"},
    }))
    assert kafka_client_config("kafka_prod") == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_PLAINTEXT",
        "ssl.endpoint.identification.algorithm": "",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="pa\\"ss";',
    }


def test_host_and_port_and_secure_default(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SCRAM", json.dumps({
        "conn_type": "kafka", "host": "broker", "port": 9094, "login": "bob", "password": "pw",
        "extra": {"sasl.mechanism": "SCRAM-SHA-512"},
    }))
    config = kafka_client_config("kafka_scram")
    assert config["bootstrap.servers"] == "broker:9094"
    assert config["security.protocol"] == "SASL_SSL"  # credentials never travel in clear text by default
    assert config["sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule required")


def test_missing_kafka_connection_is_a_clear_error():
    with pytest.raises(KafkaConnectionError, match=r"source.connection: Airflow connection 'nope_kafka' is not defined"):
        kafka_client_config("nope_kafka")


def test_secret_env_is_only_for_kafka_sources_with_a_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_K", json.dumps({"conn_type": "kafka", "host": "h", "port": 1}))
    spec = make_spec({"name": "k", "source": {"format": "kafka", "connection": "k", "topics": ["t"]}})
    env = kafka_secret_env(spec)
    assert list(env) == [KAFKA_SECRET_ENV]
    assert json.loads(base64.b64decode(env[KAFKA_SECRET_ENV])) == {"bootstrap.servers": "h:1"}
    assert " " not in env[KAFKA_SECRET_ENV]
    files = make_spec({"name": "f", "source": {"format": "text", "path": "x"}})
    assert kafka_secret_env(files) == {}
