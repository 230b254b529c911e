"""Object storage credentials from an Airflow `aws` connection: the AWS variables every client reads."""

from __future__ import annotations

import json
import os

import pytest
from sluice_airflow.aws_connection import (
    AwsConnectionError,
    aws_env,
    use_aws_connection,
)

from sluice.settings import load_settings
from sluice.storage.object_store import ObjectStore


def test_an_aws_connection_becomes_the_aws_variables_of_the_task(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_STORE", json.dumps({
        "conn_type": "aws", "login": "AKIAEXAMPLE", "password": "s3cret/key",
        "extra": {"endpoint_url": "http://store.internal:8333", "region_name": "eu-central-1"}}))
    monkeypatch.setenv("SLUICE_AWS_CONN_ID", "lake_store")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    expected = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cret/key",
                "AWS_ENDPOINT_URL": "http://store.internal:8333", "AWS_REGION": "eu-central-1"}
    assert aws_env(load_settings().aws_conn_id) == expected
    assert use_aws_connection(load_settings().aws_conn_id) == expected
    try:
        # every client of the task process now finds the store there
        store = ObjectStore.from_env()
        assert (store.endpoint, store.region, store.access_key) == ("http://store.internal:8333", "eu-central-1",
                                                                    "AKIAEXAMPLE")
    finally:
        for key in expected:
            os.environ.pop(key, None)


def test_the_provider_s_service_config_endpoint_and_no_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_S3_ONLY", json.dumps({
        "conn_type": "aws", "extra": {"service_config": {"s3": {"endpoint_url": "https://minio.internal"}}}}))
    assert aws_env("s3_only") == {"AWS_ENDPOINT_URL": "https://minio.internal"}
    assert aws_env(None) == {}


def test_a_missing_connection_says_how_to_add_it():
    with pytest.raises(AwsConnectionError) as err:
        aws_env("no_such_store")
    assert "Airflow connection 'no_such_store' is not defined" in str(err.value)
    assert "--conn-type aws" in str(err.value) and "unset SLUICE_AWS_CONN_ID" in str(err.value)
