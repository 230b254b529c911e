"""The launcher's side of the host's shared driver (sluice.launch.host), without Spark: which jobs share a driver,
and a driver that cannot start failing the job that started it with the driver's own words."""

from __future__ import annotations

import os

import pytest

from sluice.contract import maintain_job, run_job
from sluice.contract.host import JOB_SETTINGS
from sluice.launch.host import (
    HostDriverFailed,
    driver_key,
    host_submit,
    job_settings,
    private_root,
)
from sluice.launch.submit import build_plan
from sluice.process import LAUNCHER_ENV
from tests.helpers import make_spec, orders_spec, write_spec


def plan_of(lake, tmp_path, name, *, maintain=False, **spec):
    data = orders_spec(name=name, **spec)
    path = write_spec(lake.pipelines_dir, data)
    job = maintain_job(spec_path=str(path), run_id="r") if maintain else run_job(spec_path=str(path), run_id="r")
    workdir = tmp_path / name / ("maintain" if maintain else "run")
    workdir.mkdir(parents=True)
    return build_plan(job, make_spec(data), lake, workdir=workdir)


def test_jobs_share_a_driver_when_their_spark_settings_jars_master_and_environment_are_the_same(lake, tmp_path):
    one, two = plan_of(lake, tmp_path, "one"), plan_of(lake, tmp_path, "two")
    env = {"SLUICE_LAKE_ROOT": "/lake", "HOME": "/root"}
    assert driver_key(one, "local[*]", env) == driver_key(two, "local[*]", env)
    # a maintenance shares its pipeline's driver; the launcher's token is no part of the driver
    assert driver_key(plan_of(lake, tmp_path, "one", maintain=True), "local[*]", env) == driver_key(one, "local[*]", env)
    relaunched = one.__class__(**{**one.__dict__, "env_vars": {**one.env_vars, LAUNCHER_ENV: "1:2"}})
    assert driver_key(relaunched, "local[*]", env) == driver_key(one, "local[*]", env)
    # what a started driver cannot change: its own
    tuned = plan_of(lake, tmp_path, "tuned", spark_conf={"spark.sql.shuffle.partitions": 3})
    assert driver_key(tuned, "local[*]", env) != driver_key(one, "local[*]", env)
    assert driver_key(one, "spark://h:7077", env) != driver_key(one, "local[*]", env)
    assert driver_key(one, "local[*]", {**env, "AWS_ACCESS_KEY_ID": "other"}) != driver_key(one, "local[*]", env)
    assert driver_key(one, "local[*]", {**env, "SLUICE_KAFKA_SECRET_CONFIG": "{}"}) != driver_key(one, "local[*]", env)
    assert driver_key(one, "local[*]", {**env, "HOME": "/home/x"}) == driver_key(one, "local[*]", env)


def test_jobs_of_lakes_that_differ_only_in_their_own_settings_share_a_driver_and_carry_them(lake, tmp_path):
    one = plan_of(lake, tmp_path, "one")
    other_lake = lake.model_copy(update={"lake_root": tmp_path / "lake2", "checkpoint_root": tmp_path / "cp2",
                                         "pipelines_dir": tmp_path / "specs2", "ledger_path": tmp_path / "ledger2"})
    other_lake.pipelines_dir.mkdir()
    two = plan_of(other_lake, tmp_path, "two")
    env = {"SLUICE_LAKE_ROOT": "/lake", "SLUICE_LOCK_LEASE_SECONDS": "60", "SLUICE_SPARK_CONF": "{}"}
    moved = {**env, "SLUICE_LAKE_ROOT": "/elsewhere", "SLUICE_LOCK_LEASE_SECONDS": "30",
             "SLUICE_MAINTENANCE_SCHEDULE": "@hourly"}
    assert driver_key(one, "local[*]", env) == driver_key(two, "local[*]", moved)
    # each job takes its own to the driver: the plan's (what its spark-submit would have had) over the launcher's
    assert job_settings(two, moved) == {
        "SLUICE_LAKE_ROOT": str(tmp_path / "lake2"), "SLUICE_CHECKPOINT_ROOT": str(tmp_path / "cp2"),
        "SLUICE_PIPELINES": str(tmp_path / "specs2"), "SLUICE_LEDGER": str(tmp_path / "ledger2"),
        "SLUICE_LOCK_LEASE_SECONDS": "30", "SLUICE_MAINTENANCE_SCHEDULE": "@hourly"}
    assert set(JOB_SETTINGS) >= set(job_settings(one, env))


def test_a_driver_that_ends_before_taking_its_job_fails_the_job_with_the_drivers_log(lake, tmp_path):
    plan = plan_of(lake, tmp_path, "unstartable")
    broken = tmp_path / "spark-submit"
    broken.write_text("#!/bin/sh\necho 'Error: Master must either be yarn or start with spark, mesos, k8s, or local' >&2\n"
                      "exit 1\n", encoding="utf-8")
    broken.chmod(0o755)
    settings = lake.model_copy(update={"shared_driver": "host", "shared_driver_dir": tmp_path / "drivers"})
    with pytest.raises(HostDriverFailed) as failed:
        host_submit(settings, "nowhere", spark_binary=str(broken), poll_seconds=0.05)(plan)
    message = str(failed.value)
    assert message.startswith("the host driver this run started ended before it took any job; its log: "
                              f"{tmp_path / 'drivers'}/"), message
    assert "Error: Master must either be yarn or start with spark" in message
    # the job given up is not left for a later driver
    assert not list((tmp_path / "drivers").glob("*/inbox/*.json"))


def test_a_drivers_folder_others_can_write_to_is_refused(lake, tmp_path):
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)  # as a folder left in /tmp by someone else could be
    settings = lake.model_copy(update={"shared_driver": "host", "shared_driver_dir": shared})
    with pytest.raises(HostDriverFailed) as refused:
        host_submit(settings, "local[*]")(plan_of(lake, tmp_path, "guarded"))
    assert str(refused.value) == (f"the shared drivers' folder {shared} is not this user's alone (owner uid "
                                  f"{os.getuid()}, mode 777): point SLUICE_SHARED_DRIVER_DIR at a folder only this "
                                  "user can write to, or remove it to have it made so")
    assert list(shared.iterdir()) == []  # nothing handed in, no driver started
    made = tmp_path / "made" / "drivers"  # a missing one is made this user's alone
    assert private_root(made) == made and made.stat().st_mode & 0o777 == 0o700
