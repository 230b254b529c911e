"""One code path builds the spark-submit command: the plan, handed to the provider's hook."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from sluice.contract import JobRequest, maintain_job, run_job
from sluice.contract.request import BackfillSlice
from sluice.launch.submit import (
    build_plan,
    env_spark_master,
    spark_jobs_dir,
    spark_submit_command,
)
from tests.helpers import make_spec, orders_spec, write_spec

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spark_conn(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_SPARK", '{"conn_type": "spark", "host": "local[*]"}')


def test_plan_gives_the_hook_the_exact_command(lake, spark_conn, tmp_path):
    # Given a spec with a per-pipeline Spark setting
    data = orders_spec(spark_conf={"spark.sql.shuffle.partitions": 3})
    spec_path = write_spec(lake.pipelines_dir, data)
    plan = build_plan(run_job(spec_path=str(spec_path), trigger="once", dry_run=True, run_id="r1"), make_spec(data),
                      lake, workdir=tmp_path)
    # When the provider's hook builds the command from it
    command = SparkSubmitHook(**plan.hook_kwargs())._build_spark_submit_command(plan.application)
    # Then: master from the connection, Delta jars and conf, the job and its arguments
    assert command[:3] == ["spark-submit", "--master", "local[*]"]
    confs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in confs
    assert "spark.sql.shuffle.partitions=3" in confs  # the spec's value wins over the default
    assert "spark.sql.shuffle.partitions=4" not in confs
    jars = command[command.index("--jars") + 1].split(",")
    assert any(Path(j).name.startswith("delta-spark_4.2_2.13-") for j in jars)
    assert command[command.index("--name") + 1] == "sluice-orders-dry-run"
    app = command.index(str(spark_jobs_dir() / "run_pipeline.py"))
    # ONE argument: the request file, which holds the whole validated request
    assert command[app + 1:] == ["--request", str(tmp_path / "request.json")]
    job = JobRequest.read(tmp_path / "request.json")
    assert (job.kind, job.spec_path, job.trigger, job.dry_run, job.run_id, job.mode) == (
        "run", str(spec_path.resolve()), "once", True, "r1", "dry_run")
    assert job.summary_file == str(tmp_path / "summary.json")


def test_a_maintenance_plan_runs_the_maintenance_entry_point(lake, tmp_path):
    plan = build_plan(maintain_job(spec_path="x.yaml", run_id="m1", dry_run=True), make_spec(orders_spec()), lake,
                      workdir=tmp_path)
    assert plan.application == str(spark_jobs_dir() / "maintain.py")
    assert plan.name == "sluice-maintain-orders-dry-run"
    assert (JobRequest.read(tmp_path / "request.json").mode, plan.what) == ("maintenance", "maintenance")


def test_plan_passes_resolved_roots_to_the_driver(lake, tmp_path):
    plan = build_plan(run_job(spec_path="x.yaml", run_id="r"), make_spec(orders_spec()), lake, workdir=tmp_path)
    assert plan.env_vars["SLUICE_LAKE_ROOT"] == str(lake.lake_root)
    assert plan.env_vars["SLUICE_CHECKPOINT_ROOT"] == str(lake.checkpoint_root)
    assert plan.env_vars["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert (plan.job.dry_run, plan.job.trigger, plan.name) == (False, "available_now", "sluice-orders")


def test_missing_jars_is_a_clear_error(lake, monkeypatch, tmp_path):
    monkeypatch.setenv("SLUICE_JARS", str(tmp_path / "nojars"))
    from sluice.settings import load_settings

    with pytest.raises(FileNotFoundError, match=r"Delta's jars are missing from .*nojars/spark: run `make jars`"):
        build_plan(run_job(spec_path="x.yaml"), make_spec(orders_spec()), load_settings(), workdir=tmp_path)


@pytest.mark.parametrize("conn, master", [
    ('{"conn_type": "spark", "host": "local[*]"}', "local[*]"),
    ('{"conn_type": "spark", "host": "spark://10.0.0.5:7077"}', "spark://10.0.0.5:7077"),
    ('{"conn_type": "spark", "host": "spark-master", "port": 7077}', "spark://spark-master:7077"),
    ("spark://spark-master:7077", "spark://spark-master:7077"),
])
def test_sluice_run_builds_the_hooks_command_without_airflow(lake, monkeypatch, tmp_path, conn, master):
    # Given a Spark connection defined in the environment, as the project defines it
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_SPARK", conn)
    data = orders_spec(spark_conf={"spark.sql.shuffle.partitions": 3})
    plan = build_plan(run_job(spec_path=str(write_spec(lake.pipelines_dir, data)), run_id="r1"), make_spec(data),
                      lake, workdir=tmp_path)
    # When sluice resolves the master and builds the command itself
    resolved = env_spark_master("sluice_spark")
    # Then it is exactly the command Airflow's hook builds from the same connection
    assert resolved == master
    hook_command = SparkSubmitHook(**plan.hook_kwargs())._build_spark_submit_command(plan.application)
    assert spark_submit_command(plan, resolved) == hook_command


@pytest.mark.parametrize("conn", [
    None,  # not in the environment: in Airflow's database, or missing (the hook path explains)
    '{"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}',  # extras change the command
    '{"conn_type": "generic", "host": "local[*]"}',
    "not json",
])
def test_connections_only_airflow_can_resolve_go_through_airflow(monkeypatch, conn):
    if conn is None:
        monkeypatch.delenv("AIRFLOW_CONN_SLUICE_SPARK", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW_CONN_SLUICE_SPARK", conn)
    assert env_spark_master("sluice_spark") is None


def test_drivers_map_the_jvm_class_archive_when_there_is_one(lake, monkeypatch, tmp_path):
    from sluice.launch.jvm_archive import archive_path

    def java_options():
        plan = build_plan(run_job(spec_path="x.yaml"), make_spec(orders_spec()), settings, workdir=tmp_path / "w")
        return plan.conf["spark.driver.extraJavaOptions"].split()

    monkeypatch.setenv("SLUICE_HOME", str(tmp_path))  # a project folder without the archive
    monkeypatch.setenv("SLUICE_JARS", str(lake.jars_dir))
    from sluice.settings import load_settings

    settings = load_settings()
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in java_options())
    archive_path(settings).parent.mkdir(parents=True, exist_ok=True)  # the JIT's directive file may be there
    archive_path(settings).write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={archive_path(settings)}" in java_options()
    monkeypatch.setenv("SLUICE_JVM_ARCHIVE", "off")
    settings = load_settings()  # the environment is read once, into the settings
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in java_options())


def test_the_archive_the_set_up_built_holds_the_object_store_clients_classes():
    # Given the class archive `make install` built (its warm-up touches S3A against a port nothing answers on)
    from sluice.launch.jvm_archive import archive_path
    from sluice.settings import load_settings

    archive = archive_path(load_settings()).read_bytes()
    # Then a run in a bucket maps S3A's file system and the AWS SDK's S3 client instead of reading their jars
    for name in ("org/apache/hadoop/fs/s3a/S3AFileSystem", "software/amazon/awssdk/services/s3/DefaultS3Client",
                 "org/apache/spark/sql/delta/DeltaLog"):
        assert name.encode() in archive, name


@pytest.mark.parametrize(("value", "jit"), [(None, "auto"), ("", "auto"), ("auto", "auto"), ("full", "full"),
                                            ("quick", "quick"), (" Quick ", "quick")])
def test_sluice_driver_jit_sets_the_drivers_compilers(lake, monkeypatch, tmp_path, value, jit):
    from sluice.settings import load_settings

    if value is None:
        monkeypatch.delenv("SLUICE_DRIVER_JIT", raising=False)
    else:
        monkeypatch.setenv("SLUICE_DRIVER_JIT", value)
    settings = load_settings()
    plan = build_plan(run_job(spec_path="x.yaml"), make_spec(orders_spec()), settings, workdir=tmp_path / "w",
                      hold_c2=True)  # a run that may be small
    options = plan.conf["spark.driver.extraJavaOptions"].split()
    hold = settings.var_dir / "jvm" / "c2-held.json"
    assert ("-XX:TieredStopAtLevel=1" in options) is (jit == "quick")
    assert (f"-XX:CompilerDirectivesFile={hold}" in options) is (jit == "auto")
    assert ("-XX:+UnlockDiagnosticVMOptions" in options) is (jit == "auto")  # the directive file's flag is one
    assert ("-XX:+DisplayVMOutputToStderr" in options) is (jit == "auto")  # "1 compiler directives added"
    if jit == "auto":  # written for the drivers: every method kept from C2 until a run removes it
        assert hold.read_text(encoding="utf-8") == '[{match: "*.*", c2: {Exclude: true}}]\n'
    assert options[0].startswith("-Dlog4j2.configurationFile=")  # the log set-up stays first, whatever the JIT
    assert "-XX:GCTimeRatio=4" in options  # the heap grows only when collections take a fifth of the time
    unheld = build_plan(run_job(spec_path="x.yaml"), make_spec(orders_spec()), settings, workdir=tmp_path / "v",
                        hold_c2=False).conf["spark.driver.extraJavaOptions"].split()
    assert not [o for o in unheld if "CompilerDirectivesFile" in o or o == "-XX:+UnlockDiagnosticVMOptions"]


def test_c2_is_held_back_for_the_incremental_runs_of_a_pipeline_that_ran_before(lake, monkeypatch):
    from sluice.launch.submit import holds_c2
    from sluice.settings import load_settings

    monkeypatch.delenv("SLUICE_DRIVER_JIT", raising=False)
    lake = load_settings()  # the lake's folders, SLUICE_DRIVER_JIT's default
    spec = make_spec(orders_spec())
    incremental, dry_run = run_job(spec_path="x.yaml"), run_job(spec_path="x.yaml", dry_run=True)
    assert holds_c2(incremental, spec, lake) is False  # a first run reads all that waits: C2 from the start
    offsets = Path(spec.checkpoint_path(lake)) / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("v1\n{}\n{}\n", encoding="utf-8")
    assert holds_c2(incremental, spec, lake) is holds_c2(dry_run, spec, lake) is True
    assert holds_c2(run_job(spec_path="x.yaml", reset=True), spec, lake) is False
    day = BackfillSlice(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc))
    assert holds_c2(run_job(spec_path="x.yaml", backfill=day), spec, lake) is False
    assert holds_c2(maintain_job(spec_path="x.yaml"), spec, lake) is False
    monkeypatch.setenv("SLUICE_DRIVER_JIT", "full")
    assert holds_c2(incremental, spec, load_settings()) is False


def test_a_sluice_driver_jit_that_is_no_choice_is_refused_naming_the_choices(monkeypatch):
    from sluice.settings import load_settings

    monkeypatch.setenv("SLUICE_DRIVER_JIT", "fast")
    with pytest.raises(ValueError) as refused:
        load_settings()
    assert str(refused.value) == ("SLUICE_DRIVER_JIT='fast' is not a choice: set it to 'auto' (the optimising "
                                  "tier held back until a run proves large), 'quick' (the JIT's first tier only, "
                                  "for short runs) or 'full' (the JVM's default), or unset it")


def test_the_cli_refuses_a_bad_sluice_driver_jit_in_one_line(monkeypatch, capsys):
    from sluice_cli.main import main

    monkeypatch.setenv("SLUICE_DRIVER_JIT", "fast")
    assert main(["status", "x"]) == 2
    assert capsys.readouterr().err == ("sluice: SLUICE_DRIVER_JIT='fast' is not a choice: set it to 'auto' (the "
                                       "optimising tier held back until a run proves large), 'quick' (the JIT's "
                                       "first tier only, for short runs) or 'full' (the JVM's default), or unset "
                                       "it\n")


def test_sluice_spark_conf_reaches_every_driver_between_sluices_defaults_and_the_specs_own(lake, monkeypatch,
                                                                                            tmp_path):
    from sluice.settings import load_settings

    monkeypatch.setenv("SLUICE_SPARK_CONF", json.dumps({"spark.sql.codegen.wholeStage": False,
                                                        "spark.sql.shuffle.partitions": 3,
                                                        "spark.driver.memory": "3g"}))
    spec = make_spec({**orders_spec(), "spark_conf": {"spark.driver.memory": "5g"}})
    plan = build_plan(run_job(spec_path="x.yaml"), spec, load_settings(), workdir=tmp_path / "w")
    assert plan.conf["spark.sql.codegen.wholeStage"] == "false"  # JSON's false, as Spark spells it
    assert plan.conf["spark.sql.shuffle.partitions"] == "3"  # over sluice's default (2 per core)
    assert plan.conf["spark.driver.memory"] == "5g"  # the spec's own wins
    monkeypatch.delenv("SLUICE_SPARK_CONF")
    plan = build_plan(run_job(spec_path="x.yaml"), spec, load_settings(), workdir=tmp_path / "v")
    assert "spark.sql.codegen.wholeStage" not in plan.conf


@pytest.mark.parametrize(("value", "message"), [
    ("spark.driver.memory=4g", "SLUICE_SPARK_CONF is not JSON (Expecting value: line 1 column 1 (char 0)): give a "
                               "JSON object of Spark settings, "),
    ('["spark.driver.memory"]', "SLUICE_SPARK_CONF is a JSON list, not an object: give a JSON object of Spark "
                                "settings, "),
    ('{"driver.memory": "4g"}', "SLUICE_SPARK_CONF's 'driver.memory': \"4g\" is not a Spark setting: keys start with "
                                "'spark.' and values are strings, numbers or booleans, "),
    ('{"spark.driver.memory": null}', "SLUICE_SPARK_CONF's 'spark.driver.memory': null is not a Spark setting: keys "
                                      "start with 'spark.' and values are strings, numbers or booleans, "),
])
def test_a_sluice_spark_conf_that_is_no_json_object_of_settings_is_refused_showing_its_form(monkeypatch, capsys,
                                                                                          value, message):
    from sluice_cli.main import main

    monkeypatch.setenv("SLUICE_SPARK_CONF", value)
    assert main(["status", "x"]) == 2
    assert capsys.readouterr().err == (f"sluice: {message}e.g. SLUICE_SPARK_CONF='{{\"spark.driver.memory\": "
                                       "\"4g\"}', or unset it\n")


def test_a_group_is_one_spark_submit_with_a_request_each_and_refuses_what_one_session_cannot_hold(lake, tmp_path):
    from sluice.launch.submit import GroupRefused, group_plan

    def plan(name: str, **more):
        (tmp_path / name).mkdir()
        return build_plan(run_job(spec_path=f"{name}.yaml", run_id="r"), make_spec(orders_spec(name=name, **more)),
                          lake, workdir=tmp_path / name, secret_env={f"SECRET_{name.upper()}": "x"})

    one, two = plan("one"), plan("two")
    group = group_plan([one, two])
    assert group.application_args == ["--request", str(tmp_path / "one" / "request.json"),
                                      "--request", str(tmp_path / "two" / "request.json")]
    assert (group.conf, group.jars, group.name) == (one.conf, one.jars, "sluice-one-and-1-more")
    assert group.env_vars["SECRET_ONE"] == group.env_vars["SECRET_TWO"] == "x"  # each member's environment
    with pytest.raises(GroupRefused, match=r"one and three cannot share a driver: their Spark settings differ "
                                           r"\(spark\.sql\.shuffle\.partitions\); run them apart"):
        group_plan([one, plan("three", spark_conf={"spark.sql.shuffle.partitions": 3})])
    clash = build_plan(run_job(spec_path="four.yaml", run_id="r"), make_spec(orders_spec(name="four")), lake,
                       workdir=tmp_path / "two", secret_env={"SECRET_ONE": "y"})
    with pytest.raises(GroupRefused, match=r"four needs SECRET_ONE set otherwise than another pipeline"):
        group_plan([one, clash])
    (tmp_path / "m").mkdir()
    maintain = build_plan(maintain_job(spec_path="m.yaml", run_id="m", dry_run=True), make_spec(orders_spec(name="m")),
                          lake, workdir=tmp_path / "m")
    with pytest.raises(GroupRefused, match=r"one and m are jobs of different kinds"):
        group_plan([one, maintain])


def test_a_group_holds_c2_back_only_when_each_of_its_jobs_would(lake, monkeypatch, tmp_path):
    from sluice.launch.submit import group_plan
    from sluice.settings import load_settings

    monkeypatch.delenv("SLUICE_DRIVER_JIT", raising=False)
    settings = load_settings()

    def plan(name: str, hold: bool):
        return build_plan(run_job(spec_path=f"{name}.yaml", run_id="r"), make_spec(orders_spec(name=name)), settings,
                          workdir=tmp_path / name, hold_c2=hold)

    def held(group) -> bool:
        return "c2-held.json" in group.conf["spark.driver.extraJavaOptions"]

    assert held(group_plan([plan("a", True), plan("b", True)]))
    mixed = group_plan([plan("c", True), plan("d", False)])  # not refused: the JIT is no Spark setting
    assert not held(mixed)
    assert mixed.conf == plan("e", False).conf
