"""A real S3-compatible object store on 127.0.0.1: SeaweedFS (Apache-2.0), one ``weed server`` process (master,
volume server, filer and the S3 gateway), data in ``var/s3``.

The binary is built from SeaweedFS's Go module at set-up (``make s3-server``: :func:`build_command`, pinned
in :data:`SEAWEEDFS_MODULE`) into the user's build cache (:func:`cached_binary`, outside the clone), once per
version, and copied to ``var/bin/weed``; nothing is downloaded at run time. Used by
``make s3-up``/``s3-down`` (``sluice s3 up|down|status|env``) and the test suite's fixture.

Credentials are generated at the first start and kept in ``var/s3/credentials.json`` (mode 0600): the
gateway's identity file is written from them, and ``sluice s3 env`` prints them as the standard AWS
variables every S3 client reads (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``).

Settings learnt on this machine: every bucket reserves 7 volumes unless ``master.toml`` says
``[master.volume_growth] copy_1 = 1`` (else "No writable volumes" at the third bucket); telemetry and the
Iceberg/Lance catalog ports are turned off; every port is given (the gRPC ones too: by default they are the
HTTP port + 10000); the server takes 10-13 s to exit after SIGTERM, so a restart waits for the pid.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from devservices.build_cache import CachedFile, cache_root
from devservices.kafka_broker import free_port, port_open
from devservices.readiness import launch_server, wait_until
from sluice.process import ServerState, stop_process

SEAWEEDFS_MODULE = "github.com/seaweedfs/seaweedfs"
SEAWEEDFS_VERSION = "v0.0.0-20261109003541-7506e5f91cd6"
"""The pinned SeaweedFS source (the Go module proxy's pseudo-version of its 2026-11-09 commit)."""
REGION = "us-east-1"
VOLUME_SIZE_MB = 256
"""Small volumes: a local test store, not a production one (SeaweedFS preallocates nothing, but grows by volume)."""

_MASTER_TOML = """\
# written by sluice (devservices/s3_server.py): one volume per new collection (bucket), not seven
[master.volume_growth]
copy_1 = 1
copy_2 = 1
copy_3 = 1
copy_other = 1
"""


class S3ServerError(RuntimeError):
    pass


def binary_path(var_dir: Path) -> Path:
    return var_dir / "bin" / "weed"


def build_stamp(var_dir: Path) -> Path:
    """Names the version the binary was built from: a binary of another version is built again."""
    return var_dir / "bin" / "weed.version"


def built(var_dir: Path) -> bool:
    stamp = build_stamp(var_dir)
    return (binary_path(var_dir).is_file() and stamp.is_file()
            and stamp.read_text(encoding="utf-8").strip() == SEAWEEDFS_VERSION)


@dataclass
class S3Server(ServerState):
    """A store's ports and credentials (its folder and process: :class:`ServerState`)."""

    port: int
    master_port: int
    volume_port: int
    filer_port: int
    grpc_ports: dict[str, int] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def credentials_file(self) -> Path:
        return self.home / "credentials.json"

    def credentials(self) -> dict[str, str]:
        """``access_key`` and ``secret_key``: generated at the first start, kept for the next ones."""
        return credentials(self.home)

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point an S3 client (boto3, the AWS CLI, delta-rs, Arrow) here."""
        return client_env(self.home, self.port)


def credentials(home: Path) -> dict[str, str]:
    """The credentials of the server kept in ``home``: generated the first time they are asked for (before its
    first start, too), kept for every later start."""
    found = _read_json(home / "credentials.json")
    if found:
        return found
    created = {"access_key": "sluice" + secrets.token_hex(6), "secret_key": secrets.token_urlsafe(30)}
    home.mkdir(parents=True, exist_ok=True)
    _write_private(home / "credentials.json", json.dumps(created))
    return created


def client_env(home: Path, port: int) -> dict[str, str]:
    """The AWS variables of the server kept in ``home`` on ``port``, whether it runs yet or not."""
    creds = credentials(home)
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": creds["access_key"],
            "AWS_SECRET_ACCESS_KEY": creds["secret_key"], "AWS_REGION": REGION}


#: The flags the binary is built with: part of its cache key (a binary built otherwise is another build).
BUILD_FLAGS = "CGO_ENABLED=0 -trimpath -ldflags=-s"


def build_command(var_dir: Path, output: Path) -> str:
    """The shell commands that build the pinned SeaweedFS into ``output`` (``make s3-server``).

    ``go install module@version`` is refused (its go.mod has a replace directive): the module is downloaded
    with ``go mod download`` and built in its own folder, with its own go.sum (``-mod=readonly``). Go's caches
    and its work folder live in ``var/go`` (about 4 GB at the peak, nothing in ``/tmp``) and are deleted once the
    binary is built: a shared disk gets its space back. A failed build keeps them for the next try; ``make
    clean`` deletes them."""
    go = var_dir / "go"
    return (
        f"mkdir -p {go}/tmp {output.parent} && "
        f"export GOMODCACHE={go}/mod GOCACHE={go}/cache GOTMPDIR={go}/tmp GOFLAGS=-mod=readonly CGO_ENABLED=0 "
        "GOTOOLCHAIN=local && "
        f"dir=$(go mod download -json {SEAWEEDFS_MODULE}@{SEAWEEDFS_VERSION} | {sys.executable} -c "
        "'import json, sys; print(json.load(sys.stdin)[\"Dir\"])') && "
        f"cd $dir && go build -trimpath -ldflags=-s -o {output} ./weed && "
        f"cd / && chmod -R u+w {go} && rm -rf {go}"
    )


def go_version() -> str:
    """The Go toolchain's version (``go1.26.8``): part of the binary's cache key."""
    try:
        found = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True,
                               env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as err:
        raise S3ServerError(f"Go is needed to build the local S3 server (SeaweedFS) and `go env GOVERSION` "
                            f"failed ({err}): install Go 1.24 or newer and run `make s3-server` again") from None
    return found


def cached_binary(go: str | None = None) -> CachedFile:
    """The binary's entry in the user's build cache (:mod:`devservices.build_cache`), keyed by the pinned module
    version, the Go version, the build flags and the machine: a second clone copies it instead of building."""
    return CachedFile(cache_root(), "seaweedfs", {
        "module": SEAWEEDFS_VERSION, "go": go or go_version(), "flags": BUILD_FLAGS, "arch": platform.machine(),
    }, "weed")


#: Free space the build needs at its peak (Go's module and build caches), checked before it starts.
BUILD_SPACE_BYTES = 5 * 1024**3


def start_server(home: Path, var_dir: Path, *, port: int = 8333, timeout: float = 120.0) -> S3Server:
    """Start the store (its folder ``home``), wait until its S3 gateway answers a signed request with the
    generated credentials. Returns the running server (pid and ports also in ``home/state.json``)."""
    weed = binary_path(var_dir).resolve()
    if not weed.is_file():
        raise S3ServerError(f"the SeaweedFS binary {weed} is missing: run `make s3-server` (builds it from its "
                            "Go module, once)")
    home.mkdir(parents=True, exist_ok=True)
    existing = S3Server.load(home)
    if existing and existing.running():
        raise S3ServerError(f"the S3 server from {home} is already running (pid {existing.pid}, {existing.endpoint})")
    if port_open(port):
        raise S3ServerError(f"port {port} on 127.0.0.1 is taken: stop what uses it or set SLUICE_S3_PORT")
    server = _with_ports(home, port, existing)
    config = home / "config"
    config.mkdir(exist_ok=True)
    (config / "master.toml").write_text(_MASTER_TOML, encoding="utf-8")
    creds = server.credentials()
    identities = {"identities": [{"name": "sluice", "credentials": [
        {"accessKey": creds["access_key"], "secretKey": creds["secret_key"]}],
        "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
    _write_private(config / "s3.json", json.dumps(identities, indent=1))
    (home / "data").mkdir(exist_ok=True)
    command = [
        str(weed), f"-config_dir={config}", "-logtostderr", "server",
        "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={home / 'data'}",
        f"-master.port={server.master_port}", f"-master.port.grpc={server.grpc_ports['master']}",
        f"-master.volumeSizeLimitMB={VOLUME_SIZE_MB}", "-master.telemetry=false",
        # a master started again with its saved state waits this long before it elects itself (10 s by
        # default), and until then no volume server is known; it is the only master, it has no peer to wait for
        "-master.electionTimeout=2s",
        f"-volume.port={server.volume_port}", f"-volume.port.grpc={server.grpc_ports['volume']}", "-volume.max=64",
        # a stop waits this long for a cluster's clients to move to other volume servers (10 s by default);
        # there is none: the one volume server stops when asked (its requests in flight still end first)
        "-volume.preStopSeconds=0",
        "-filer", f"-filer.port={server.filer_port}", f"-filer.port.grpc={server.grpc_ports['filer']}",
        "-s3", f"-s3.port={server.port}", f"-s3.port.grpc={server.grpc_ports['s3']}", f"-s3.config={config / 's3.json'}",
        "-s3.port.iceberg=0", "-s3.port.lance=0",
    ]
    return launch_server(server, command, f"the S3 server at {server.endpoint}", "answer",
                         lambda: port_open(server.port) and _lists_buckets(server) and _volumes_known(server),
                         timeout, home / "server.log", cwd=home, error=S3ServerError, stop=stop_server)


def _with_ports(home: Path, port: int, previous: S3Server | None) -> S3Server:
    """The server's internal ports: those of its last start in ``home`` when there was one. The master keeps
    its state in a folder named after its port (``<data>/m<port>``): on another port it would start without
    it, see volumes it does not know, and freeze volume growth ("volume growth is frozen after master state
    loss"), so that no new bucket could take a write."""
    if previous is None:
        master, volume, filer, *grpc = _distinct_free_ports(7, besides=port)
        return S3Server(home=home, port=port, master_port=master, volume_port=volume, filer_port=filer,
                        grpc_ports=dict(zip(("master", "volume", "filer", "s3"), grpc, strict=True)))
    ports = (previous.master_port, previous.volume_port, previous.filer_port, *previous.grpc_ports.values())
    deadline = time.monotonic() + 30  # a server killed a moment ago: its ports free up
    while (taken := [p for p in ports if port_open(p)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    if taken:
        raise S3ServerError(f"the S3 server in {home} runs its master, volume and filer on the ports of its first "
                            f"start (its state is kept by port), and {taken} are taken now: free them and start "
                            "again")
    return S3Server(home=home, port=port, master_port=previous.master_port, volume_port=previous.volume_port,
                    filer_port=previous.filer_port, grpc_ports=dict(previous.grpc_ports))


def _distinct_free_ports(count: int, *, besides: int) -> list[int]:
    """``count`` ports free now, none the same and none ``besides``: free_port draws each at random, and two
    draws of one start gave the same port once (the filer's gRPC on the master's port: the server exited)."""
    ports: list[int] = []
    while len(ports) < count:
        if (candidate := free_port()) not in ports and candidate != besides:
            ports.append(candidate)
    return ports


def filesystem(server: S3Server):
    """An Arrow S3 file system on the server, with its credentials."""
    from pyarrow import fs as pafs

    creds = server.credentials()
    return pafs.S3FileSystem(access_key=creds["access_key"], secret_key=creds["secret_key"], region=REGION,
                             endpoint_override=f"127.0.0.1:{server.port}", scheme="http",
                             connect_timeout=2, request_timeout=5, retry_strategy=pafs.AwsStandardS3RetryStrategy(0),
                             allow_bucket_creation=True)


def _lists_buckets(server: S3Server) -> bool:
    """A signed ListBuckets answered: the gateway is up and knows the credentials. While it starts it
    refuses, resets or answers 5xx (Arrow raises OSError for each): not yet."""
    from pyarrow import fs as pafs

    try:
        filesystem(server).get_file_info(pafs.FileSelector("/", recursive=False))
    except OSError:
        return False
    return True


def _volumes_known(server: S3Server) -> bool:
    """The master knows the volume server (and so the volumes it holds): before its first heartbeat the
    gateway lists buckets but cannot read an object's data (a 500 in the middle of the answer)."""
    from devservices.readiness import http_json

    status = http_json(f"http://127.0.0.1:{server.master_port}/dir/status", timeout=2)
    return bool(status and (status.get("Topology") or {}).get("Max"))


def create_bucket(server: S3Server, bucket: str, timeout: float = 90.0) -> bool:
    """Create ``bucket`` if missing; True if it was created. Returns once the bucket takes a write: SeaweedFS
    grows a new bucket's first volume when the first object arrives, and answers "internal error" (volume
    growth in progress) until it has (seconds on a busy machine, longer just after a restart)."""
    from pyarrow import fs as pafs

    store = filesystem(server)
    if store.get_file_info(bucket).type != pafs.FileType.NotFound:
        return False
    store.create_dir(bucket)
    probe = f"{bucket}/.sluice-ready"

    def takes_a_write() -> bool:
        try:
            with store.open_output_stream(probe) as out:
                out.write(b"ready")
        except OSError:
            return False
        store.delete_file(probe)
        return True

    wait_until(f"bucket {bucket} at {server.endpoint} to take a write", takes_a_write, timeout,
               server.home / "server.log", every=1.0, error=S3ServerError)
    return True


def stop_server(server: S3Server, timeout: float = 45.0, *, crash: bool = False) -> None:
    """Stop cleanly (SIGTERM: the server flushes its volumes and filer store, ~15 s here); SIGKILL after
    ``timeout``. ``crash=True`` kills it at once, as a machine failure would. Returns once the process is
    gone, so a new server can take its ports and folder."""
    stop_process(server.pid, timeout, crash=crash)
    server.pid = None
    if server.home.is_dir():
        server.save()


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (credentials)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(path, 0o600)


def main(argv: list[str] | None = None) -> int:
    """``python -m devservices.s3_server build``: put the pinned SeaweedFS at ``var/bin/weed`` unless it is there: copied
    from the user's build cache when a checked entry is there, else built into the cache first."""
    from sluice.settings import load_settings

    argv = sys.argv[1:] if argv is None else argv
    if argv != ["build"]:
        print("usage: python -m devservices.s3_server build", file=sys.stderr)
        return 2
    var_dir = load_settings().var_dir
    if built(var_dir):
        print(f"SeaweedFS {SEAWEEDFS_VERSION}: {binary_path(var_dir)} is built")
        return 0
    cached = cached_binary()
    if not cached.valid():
        var_dir.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(var_dir).free
        if free < BUILD_SPACE_BYTES:
            print(f"warning: {free / 1024**3:.1f} GB free at {var_dir}; the SeaweedFS build needs about "
                  f"{BUILD_SPACE_BYTES / 1024**3:.0f} GB for Go's caches while it runs (deleted after it). If it "
                  "stops with 'no space left on device', free space there and run `make s3-server` again",
                  flush=True)
        print(f"building SeaweedFS {SEAWEEDFS_VERSION} from its Go module into {cached.folder} (the user's build "
              "cache; once per version: ~7 min on 2 cores, Go caches in var/go while it runs)", flush=True)
        output = var_dir / "go-build" / "weed"
        code = subprocess.run(["bash", "-euo", "pipefail", "-c", build_command(var_dir, output)]).returncode
        if code:
            return code
        cached.store(output)
        shutil.rmtree(output.parent, ignore_errors=True)
    else:
        print(f"SeaweedFS {SEAWEEDFS_VERSION}: copied from the build cache ({cached.folder}, checksum checked)")
    cached.copy_to(binary_path(var_dir))
    build_stamp(var_dir).write_text(SEAWEEDFS_VERSION + "\n", encoding="utf-8")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
