"""Several gateways on one work queue, as several machines: each gateway runs in a network namespace of its own,
joined to this host by a veth pair with its own addresses (made here with ``ip netns``; the tests run as root), and
reaches the one broker over that link.  Each takes a message only when it has a free slot, so the work spreads; a
killed gateway's unacked messages go to the other."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from gateway.testing import GatewayProcess
from tests.test_lowlatency import (
    DurableReplies,
    assert_answered_at_most_once_unmarked,
    collect_finals,
    wait_for_consumer,
)

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = pytest.mark.gateway

QUEUE = "grid-scaleout"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Host:
    """A network namespace with a veth link to this host: ``address`` is its end, ``gateway_ip`` this host's."""

    def __init__(self, name: str, subnet: str, link: str) -> None:
        self.name, self.link = name, link
        self.address, self.host_address = f"{subnet}.2", f"{subnet}.1"

    def create(self) -> None:
        name = self.name
        ip("netns", "add", name)
        outside, inside = f"{self.link}o", f"{self.link}i"
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", name)
        ip("addr", "add", f"{self.host_address}/24", "dev", outside)
        ip("link", "set", outside, "up")
        ip("netns", "exec", name, "ip", "addr", "add", f"{self.address}/24", "dev", inside)
        ip("netns", "exec", name, "ip", "link", "set", inside, "up")
        ip("netns", "exec", name, "ip", "link", "set", "lo", "up")

    def remove(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False, capture_output=True)  # takes the veth pair


class NamespacedGateway(GatewayProcess):
    """A gateway process started inside a network namespace."""

    def __init__(self, host: Host, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.host = host

    def command(self, port_files):
        return ["ip", "netns", "exec", self.host.name, *super().command(port_files)]


@pytest.fixture(scope="module")
def hosts():
    tag = os.getpid() % 200 + 20
    made = []
    try:
        for index in (1, 2):
            host = Host(f"bbll{tag}h{index}", f"10.{tag}.{index}", f"bb{tag}v{index}")
            made.append(host)  # removed at the end even if making it fails half-way
            host.create()
        yield made
    finally:
        for host in made:
            host.remove()


@pytest.fixture
def base():
    path = Path(tempfile.mkdtemp(prefix="lowlatency-scaleout-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_on(host: Host, broker, base: Path, name: str) -> NamespacedGateway:
    tmp = base / name
    tmp.mkdir()
    config = (f'[carod]\nenable_carod = true\ncarod_broker_ip = "{host.host_address}"\n'
              f"carod_broker_port = {broker.port}\ncarod_broker_queue = \"{QUEUE}\"\ncarod_max_jobs = 1\n"
              f'[backends.local]\nslots = 1\nschedd_name = "{name}"\n')
    return NamespacedGateway(host, tmp / "state", config, tmp=tmp).start()


def ran_on(finals: dict[str, list]) -> dict[str, str]:
    return {message_id: headers[-1]["GlobalJobId"].strip('"').split("#")[0] for message_id, headers in finals.items()}


def test_two_gateways_share_the_work_and_a_killed_ones_messages_go_to_the_other(amqp_broker, hosts, base):
    first, second = (start_on(host, amqp_broker, base, f"host{index}") for index, host in enumerate(hosts, 1))
    client = DurableReplies(amqp_broker, QUEUE, "replies-scaleout")
    try:
        wait_for_consumer(amqp_broker, QUEUE, count=2)
        ids = [client.send({"Cmd": '"/bin/sleep"', "Arguments": '"0.2"'}) for _ in range(20)]
        hosts_of = ran_on(collect_finals(client, ids))
        share = sum(1 for host in hosts_of.values() if host == "host1") / len(ids)
        assert 0.3 <= share <= 0.7, hosts_of

        ids = [client.send({"Cmd": '"/bin/sleep"', "Arguments": '"0.3"'}) for _ in range(10)]
        client.connection.sleep(0.5)
        first.kill()  # its running job stays its own (committed); whatever it had not committed goes back
        time.sleep(2)
        first.start()  # the first host comes back and finishes the job it had taken
        finals = collect_finals(client, ids)
        hosts_of = ran_on(finals)
        assert sum(1 for host in hosts_of.values() if host == "host2") >= 7, hosts_of
        assert_answered_at_most_once_unmarked(finals, ids)
    finally:
        client.channel.queue_delete(queue="replies-scaleout")
        client.close()
        first.stop()
        second.stop()
