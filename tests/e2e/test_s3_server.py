"""The project's local S3 server: a real SeaweedFS, built at set-up (``make s3-server``), started on 127.0.0.1.

What sluice writes to object storage is proven against it; here, that it is an S3 server as a client sees
one: signed requests with the generated credentials, buckets, objects, listings, bad credentials refused,
and ``sluice s3 up|env|status|create-bucket|down`` for a person at a shell.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from pyarrow import fs as pafs

from devservices.kafka_broker import free_port
from devservices.s3_server import (
    REGION,
    S3Server,
    create_bucket,
    filesystem,
    start_server,
    stop_server,
)
from sluice.settings import load_settings
from sluice.storage.object_store import ObjectStore

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("s3"), load_settings().var_dir, port=free_port())
    yield server
    stop_server(server, crash=True)  # its data is thrown away: no need to wait for a clean stop


def test_buckets_and_objects_with_the_generated_credentials(server):
    env = server.env()
    assert env["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{server.port}" and env["AWS_REGION"] == REGION
    assert env["AWS_ACCESS_KEY_ID"] and len(env["AWS_SECRET_ACCESS_KEY"]) >= 30
    assert oct(server.credentials_file.stat().st_mode & 0o777) == "0o600"
    store = filesystem(server)
    # more buckets than SeaweedFS's default volume growth leaves room for (7 volumes each)
    for n in range(4):
        assert create_bucket(server, f"bucket-{n}") is True
        with store.open_output_stream(f"bucket-{n}/landing/part-{n}.json") as out:
            out.write(b'{"id": %d}\n' % n)
    assert create_bucket(server, "bucket-0") is False
    listed = store.get_file_info(pafs.FileSelector("bucket-3", recursive=True))
    assert [(i.path, i.size) for i in listed if i.type == pafs.FileType.File] == [("bucket-3/landing/part-3.json", 10)]
    with store.open_input_stream("bucket-2/landing/part-2.json") as stream:
        assert stream.read() == b'{"id": 2}\n'
    store.delete_file("bucket-2/landing/part-2.json")
    assert store.get_file_info("bucket-2/landing/part-2.json").type == pafs.FileType.NotFound


def test_wrong_credentials_are_refused(server):
    wrong = pafs.S3FileSystem(access_key=server.credentials()["access_key"], secret_key="not-the-secret",
                              region=REGION, endpoint_override=f"127.0.0.1:{server.port}", scheme="http",
                              retry_strategy=pafs.AwsStandardS3RetryStrategy(0))
    with pytest.raises(OSError, match="SIGNATURE_DOES_NOT_MATCH"):
        wrong.get_file_info(pafs.FileSelector("bucket-0", recursive=True))


def test_the_server_keeps_its_data_and_credentials_across_a_stop_and_a_kill(tmp_path_factory):
    """One server stopped as `make s3-down` stops it, started again, then killed (kill -9) and started again:
    after each restart the credentials, every object written before it, the master's ports and state are kept,
    and a new bucket still gets a volume and takes a write."""
    home = tmp_path_factory.mktemp("s3-restart")
    first = start_server(home, load_settings().var_dir, port=free_port())
    try:
        create_bucket(first, "kept")
        with filesystem(first).open_output_stream("kept/a.txt") as out:
            out.write(b"a")
        creds = first.credentials()
    finally:
        stop_server(first)  # make s3-down
    assert not first.running()
    written = {"kept/a.txt": b"a"}
    for round_ in range(2):  # after the clean stop, then after the kill -9 that ends the first round
        again = start_server(home, load_settings().var_dir, port=free_port())
        try:
            assert again.credentials() == creds
            for key, data in written.items():
                with filesystem(again).open_input_stream(key) as stream:
                    assert stream.read() == data, key
            # the master kept its state: a new bucket still gets a volume and takes a write
            assert (again.master_port, again.grpc_ports) == (first.master_port, first.grpc_ports)
            bucket = f"new-after-restart-{round_}"
            create_bucket(again, bucket)
            with ObjectStore.from_env(again.env()).arrow().open_output_stream(f"{bucket}/b.txt") as out:
                out.write(b"b")
            with filesystem(again).open_input_stream(f"{bucket}/b.txt") as stream:
                assert stream.read() == b"b"
            written[f"{bucket}/b.txt"] = b"b"
        finally:
            stop_server(again, crash=True)  # kill -9 (after the last round: the test's end)
        assert not again.running()


def test_sluice_s3_commands(tmp_path):
    # a project folder of its own (its var/s3), with the project's built binary
    settings = load_settings()
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "bin").symlink_to(settings.var_dir / "bin")
    env = {**os.environ, "SLUICE_HOME": str(tmp_path), "SLUICE_S3_PORT": str(free_port())}

    def sluice(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sluice_cli.main", "s3", *args], env=env, capture_output=True,
                              text=True, timeout=180)

    assert sluice("status").returncode == 1
    refused = sluice("env")
    assert refused.returncode == 1 and "the local S3 server is not running: start it with `make s3-up`" in refused.stderr
    up = sluice("up")
    try:
        assert up.returncode == 0, up.stderr
        assert f"s3: running at http://127.0.0.1:{env['SLUICE_S3_PORT']}" in up.stdout
        assert sluice("status").returncode == 0
        exports = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1)
                       for line in sluice("env").stdout.splitlines())
        assert exports == S3Server.load(tmp_path / "var" / "s3").env()
        assert sluice("create-bucket", "lake").stdout.strip() == "s3: bucket lake created"
        assert sluice("create-bucket", "lake").stdout.strip() == "s3: bucket lake exists"
        assert sluice("up").stdout.startswith("s3: already running at ")
    finally:
        down = sluice("down")
    assert down.stdout.strip() == "s3: stopped" and sluice("status").returncode == 1


def test_a_new_servers_ports_are_all_different(monkeypatch, tmp_path):
    # free_port draws at random: two draws of one start once gave the same port, and the server exited
    import devservices.s3_server as s3

    draws = iter([30001, 30001, 8333, 30002, 30002, 30003, 30004, 30005, 30005, 30006, 30007])
    monkeypatch.setattr(s3, "free_port", lambda: next(draws))
    server = s3._with_ports(tmp_path, 8333, None)
    ports = [server.master_port, server.volume_port, server.filer_port, *server.grpc_ports.values()]
    assert ports == [30001, 30002, 30003, 30004, 30005, 30006, 30007]
