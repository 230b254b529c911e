"""A real Apache Kafka broker on 127.0.0.1: one KRaft node (broker + controller), no ZooKeeper.

Started from Apache Kafka's own jars, fetched by ``make jars`` into ``var/jars/kafka`` from the pinned
pom.xml. Used by ``make kafka-up``/``kafka-down`` (``sluice kafka up|down|status``), the demo, and the
test suite's session fixture.

The broker has a PLAINTEXT listener and, when ``sasl_users`` is given, a SASL_PLAINTEXT listener with the
PLAIN mechanism, so that credentials can be tested end to end.
"""

from __future__ import annotations

import base64
import random
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from devservices.readiness import launch_server
from sluice.process import (  # noqa: F401 - port_open: imported from here too
    ServerState,
    port_open,
    stop_process,
)


class BrokerError(RuntimeError):
    pass


def free_port() -> int:
    """A port free now on 127.0.0.1, chosen below the kernel's ephemeral range: a port of that range (what
    binding port 0 gives) can be taken as the local port of any outgoing connection between this choice and
    the server's bind, and a Spark server then moves to the next port without failing (seen: a stack whose
    master UI was not where it was asked to be)."""
    low = _ephemeral_low()
    if low > 20_500:
        for _ in range(200):
            port = random.randrange(20_000, low)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


@dataclass
class Broker(ServerState):
    """A broker's ports (its folder and process: :class:`ServerState`)."""

    port: int
    controller_port: int
    sasl_port: int | None = None
    sasl_users: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str | None:
        return f"127.0.0.1:{self.sasl_port}" if self.sasl_port else None


def _properties(broker: Broker) -> str:
    listeners = [f"PLAINTEXT://127.0.0.1:{broker.port}", f"CONTROLLER://127.0.0.1:{broker.controller_port}"]
    advertised = [f"PLAINTEXT://127.0.0.1:{broker.port}"]
    protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
    lines = [
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{broker.controller_port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={broker.home / 'data'}",
        "num.partitions=1",
        # topics are created on purpose (a typo in a spec is an error, not a new empty topic)
        "auto.create.topics.enable=false",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "log.retention.hours=-1",
        # a broker started again after a crash registers anew only once its last registration's session has
        # run out (Kafka's default 9 s): a 4 s session (heartbeats each second) brings it back in ~6 s, not ~13
        "broker.session.timeout.ms=4000",
        "broker.heartbeat.interval.ms=1000",
    ]
    if broker.sasl_port:
        listeners.append(f"SASL_PLAINTEXT://127.0.0.1:{broker.sasl_port}")
        advertised.append(f"SASL_PLAINTEXT://127.0.0.1:{broker.sasl_port}")
        protocols.append("SASL_PLAINTEXT:SASL_PLAINTEXT")
        users = " ".join(f'user_{name}="{password}"' for name, password in broker.sasl_users.items())
        lines += [
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        ]
    lines += [
        f"listeners={','.join(listeners)}",
        f"advertised.listeners={','.join(advertised)}",
        f"listener.security.protocol.map={','.join(protocols)}",
    ]
    return "\n".join(lines) + "\n"


_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = kafka
logger.kafka.level = info
"""


def _java_command(jars_dir: Path, main: str, *args: str, heap: str = "512m", log4j: Path | None = None) -> list[str]:
    jars = jars_dir / "kafka"
    if not any(jars.glob("kafka_2.13-*.jar")):
        raise BrokerError(f"Kafka's jars are missing from {jars}: run `make jars` (Maven fetches them from pom.xml)")
    command = ["java", f"-Xmx{heap}", "-Xms128m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
    if log4j:
        command.append(f"-Dlog4j2.configurationFile=file:{log4j}")
    return [*command, "-cp", f"{jars}/*", main, *args]


def start_broker(
    home: Path, jars_dir: Path, *, port: int | None = None, sasl_users: dict[str, str] | None = None,
    timeout: float = 90.0,
) -> Broker:
    """Format a fresh KRaft log folder under ``home`` (if new) and start the broker; wait until it serves
    metadata. Returns the running broker (its pid and ports are also saved in ``home/state.json``)."""
    home.mkdir(parents=True, exist_ok=True)
    existing = Broker.load(home)
    if existing and existing.running():
        raise BrokerError(f"a broker from {home} is already running (pid {existing.pid}, {existing.bootstrap_servers})")
    port = port or free_port()
    if port_open(port):
        raise BrokerError(f"port {port} on 127.0.0.1 is taken: stop what uses it or set SLUICE_KAFKA_PORT")
    broker = Broker(
        home=home, port=port, controller_port=free_port(),
        sasl_port=free_port() if sasl_users else None, sasl_users=dict(sasl_users or {}),
    )
    config = home / "server.properties"
    config.write_text(_properties(broker), encoding="utf-8")
    log4j = home / "log4j2.properties"
    log4j.write_text(_LOG4J.format(log=home / "server.log"), encoding="utf-8")
    if not (home / "data" / "meta.properties").is_file():
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        subprocess.run(
            # --cluster-id=ID: a random id may start with "-", which the tool would read as an option
            _java_command(jars_dir, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(config),
                          "--ignore-formatted", heap="256m", log4j=log4j),
            check=True, capture_output=True, text=True, timeout=120,
        )
    return _launch(broker, jars_dir, timeout)


def restart_broker(broker: Broker, jars_dir: Path, timeout: float = 90.0) -> Broker:
    """Start a stopped broker again on the same ports and data."""
    return broker if broker.running() else _launch(broker, jars_dir, timeout)


def _launch(broker: Broker, jars_dir: Path, timeout: float) -> Broker:
    home = broker.home
    command = _java_command(jars_dir, "kafka.Kafka", str(home / "server.properties"), log4j=home / "log4j2.properties")
    return launch_server(broker, command, f"the Kafka broker at {broker.bootstrap_servers}", "serve metadata",
                         lambda: _serves_metadata(broker.bootstrap_servers), timeout, home / "server.log",
                         output=home / "stdout.log", error=BrokerError, stop=stop_broker)


def _serves_metadata(bootstrap: str) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    if not port_open(int(bootstrap.rsplit(":", 1)[1])):
        return False
    try:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
    except KafkaException:  # a starting broker: transport error or timed out; not yet
        return False
    return True


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> bool:
    """Create ``topic`` if missing; True if it was created."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=10).topics:
        return False
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(timeout=30)
    return True


def stop_broker(broker: Broker, timeout: float = 30.0, *, crash: bool = False) -> None:
    """Stop cleanly (SIGTERM: the broker flushes and closes its logs); SIGKILL after ``timeout``.
    ``crash=True`` kills it at once, as a machine failure would (it recovers its logs on restart)."""
    stop_process(broker.pid, timeout, crash=crash)
    broker.pid = None
    if broker.home.is_dir():
        broker.save()
