"""Object storage as sluice names it: URIs as roots, one answer for every client's endpoint and credentials,
the S3A jars and settings only for a job that uses a store. No network here (tests/e2e/test_object_storage.py
has the real server)."""

from __future__ import annotations

from pathlib import Path

from sluice.contract import run_job
from sluice.launch.submit import build_plan
from sluice.settings import load_settings
from sluice.storage.object_store import ObjectStore, bucket_and_key, delta_rs_location
from tests.helpers import make_spec, orders_spec

ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:8333", "AWS_ACCESS_KEY_ID": "key-id", "AWS_SECRET_ACCESS_KEY": "s3cret",
       "AWS_REGION": "eu-west-1"}


def test_roots_in_a_bucket_stay_uris_and_relative_paths_are_keys_under_them():
    settings = load_settings({"SLUICE_LAKE_ROOT": "s3a://lake/root/", "SLUICE_CHECKPOINT_ROOT": "s3a://lake/cp"})
    assert (settings.lake_root, settings.checkpoint_root) == ("s3a://lake/root", "s3a://lake/cp")
    assert settings.ledger_path == "s3a://lake/root/_sluice/ledger" and settings.on_object_store
    spec = make_spec(orders_spec())
    assert spec.source_path(settings) == "s3a://lake/root/landing/orders"
    assert spec.sink_path(settings) == "s3a://lake/root/bronze/orders"
    assert spec.checkpoint_path(settings) == "s3a://lake/cp/orders"
    assert spec.quarantine_table_path(settings) == "s3a://lake/root/_quarantine/orders"
    local = load_settings({"SLUICE_LAKE_ROOT": "/tmp/lake/../lake2"})
    assert local.lake_root == Path("/tmp/lake2") and local.ledger_path == Path("/tmp/lake2/_sluice/ledger")
    assert not local.on_object_store


def test_every_client_gets_the_same_endpoint_region_and_credentials():
    store = ObjectStore.from_env(ENV)
    assert "s3cret" not in repr(store) and "key-id" not in repr(store)  # never in a log
    assert store.s3a_conf() == {"fs.s3a.endpoint.region": "eu-west-1", "fs.s3a.endpoint": "http://127.0.0.1:8333",
                                "fs.s3a.path.style.access": "true", "fs.s3a.connection.ssl.enabled": "false"}
    assert delta_rs_location("s3a://lake/root/_sluice/ledger", store) == ("s3://lake/root/_sluice/ledger", {
        "conditional_put": "etag", "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
        "AWS_ALLOW_HTTP": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "AWS_ACCESS_KEY_ID": "key-id",
        "AWS_SECRET_ACCESS_KEY": "s3cret"})
    assert delta_rs_location("/lake/ledger", store) == ("/lake/ledger", None)
    assert bucket_and_key("s3a://lake/a/b/") == ("lake", "a/b")
    assert ObjectStore.from_env({}).s3a_conf() == {}  # AWS S3 itself, S3A's own defaults


def test_only_a_job_that_uses_a_store_gets_the_s3a_jars_and_settings_and_no_secret(lake, monkeypatch, tmp_path):
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    local = build_plan(run_job(spec_path="x.yaml", run_id="r"), make_spec(orders_spec()), lake, workdir=tmp_path)
    assert "hadoop-aws" not in local.jars and not any("s3a" in key for key in local.conf)
    assert local.object_store_uris == []

    monkeypatch.setenv("SLUICE_LAKE_ROOT", "s3a://lake/root")
    settings = load_settings()
    plan = build_plan(run_job(spec_path="x.yaml", run_id="r"), make_spec(orders_spec()), settings, workdir=tmp_path)
    assert "/s3/hadoop-aws-3.5.0.jar" in plan.jars
    assert plan.conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert plan.env_vars["SLUICE_LAKE_ROOT"] == "s3a://lake/root"
    assert "s3a://lake/root/bronze/orders" in plan.object_store_uris
    everything = " ".join([*plan.conf.values(), plan.jars, *plan.application_args])
    assert "s3cret" not in everything and "s3cret" not in Path(plan.application_args[1]).read_text()
