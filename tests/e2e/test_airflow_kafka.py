"""A Kafka pipeline run by real Airflow on a real broker, its SASL credentials from an Airflow connection."""

from __future__ import annotations

import json

from tests.conftest import SASL_PASSWORD, SASL_USER
from tests.e2e.conftest import sluice
from tests.e2e.test_airflow import summary_of, xcom_return_value
from tests.helpers import end_offsets, kafka_spec, new_topic, produce, write_spec


def test_kafka_dag_with_sasl_connection_keeps_the_password_out_of_logs_and_xcom(
    lake, spark, airflow_db, kafka_broker, monkeypatch
):
    topic = new_topic(kafka_broker.bootstrap_servers)
    produce(kafka_broker.bootstrap_servers, topic, range(25))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SASL_TEST", json.dumps({
        "conn_type": "kafka", "host": kafka_broker.sasl_bootstrap_servers,
        "login": SASL_USER, "password": SASL_PASSWORD, "extra": {"security.protocol": "SASL_PLAINTEXT"},
    }))
    spec = kafka_spec("af_kafka", None, topic)
    spec["source"].pop("bootstrap_servers")
    spec["source"]["connection"] = "kafka_sasl_test"
    write_spec(lake.pipelines_dir, spec)

    done = sluice("airflow", "dags", "test", "af_kafka")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    summary = summary_of(output)
    assert summary["input_rows"] == 25
    # per-partition start/end offsets of every micro-batch, in the summary and the XCom
    offsets = {topic: end_offsets(kafka_broker.bootstrap_servers, topic)}
    assert summary["micro_batches"][0]["sources"][0]["end_offset"] == offsets
    xcom = xcom_return_value("af_kafka")
    assert xcom["micro_batches"][0]["sources"][0]["end_offset"] == offsets
    assert spark.read.format("delta").load(summary["sink"]).count() == 25

    # the secret is nowhere: not in the task log, the spark-submit command it shows, or the XCom
    assert SASL_PASSWORD not in output
    assert SASL_PASSWORD not in json.dumps(xcom)
    assert "SLUICE_KAFKA_SECRET_CONFIG" not in output


def test_wrong_password_is_a_clear_error(lake, airflow_db, kafka_broker, monkeypatch):
    topic = new_topic(kafka_broker.bootstrap_servers)
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_BAD_LOGIN", json.dumps({
        "conn_type": "kafka", "host": kafka_broker.sasl_bootstrap_servers,
        "login": SASL_USER, "password": "wrong-password", "extra": {"security.protocol": "SASL_PLAINTEXT"},
    }))
    spec = kafka_spec("kafka_bad_login", None, topic)
    spec["source"].pop("bootstrap_servers")
    spec["source"]["connection"] = "kafka_bad_login"
    spec_path = write_spec(lake.pipelines_dir, spec)
    done = sluice("run", str(spec_path))
    assert done.returncode == 1
    error = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert error.startswith(f"Kafka at {kafka_broker.sasl_bootstrap_servers} refused the credentials")
    assert "wrong-password" not in done.stdout + done.stderr
