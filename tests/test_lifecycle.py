"""The lifecycle as twisted.application services (gateway/lifecycle.py, gateway/app.py): parts started in order and
stopped in reverse, each stop awaited before the next begins, a failing stop logged while the parts before it still
stop; ports bound at the privileged start (the local socket at the start); and the gateway's own tree in the order
docs/architecture.md draws it."""

from __future__ import annotations

import re

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import globalLogPublisher

from gateway.app import Gateway
from gateway.config import GatewayConfig
from gateway.lifecycle import InOrder, Listening, Step
from gateway.testing import SOURCE_ROOT


class Recorded(Service):
    """A part that records its start and stop in ``events``; its stop waits for ``release`` when one is given."""

    def __init__(self, name: str, events: list[str], release: Deferred | None = None, fails: bool = False) -> None:
        self.setName(name)
        self.events, self.release, self.fails = events, release, fails

    def startService(self) -> None:
        super().startService()
        self.events.append(f"start {self.name}")

    def stopService(self) -> Deferred | None:
        super().stopService()
        self.events.append(f"stop {self.name}")
        if self.fails:
            raise RuntimeError(f"{self.name} failed to stop")
        return self.release


def test_parts_start_in_order_and_stop_in_reverse_each_after_the_one_before():
    events: list[str] = []
    slow = Deferred()
    tree = InOrder()
    for part in (Recorded("a", events), Recorded("b", events), Recorded("c", events, release=slow)):
        part.setServiceParent(tree)
    tree.startService()
    stopped = tree.stopService()
    assert events == ["start a", "start b", "start c", "stop c"] and not stopped.called  # b waits for c
    slow.callback(None)
    assert events[-2:] == ["stop b", "stop a"] and stopped.called


def test_a_part_whose_stop_fails_is_logged_and_the_parts_before_it_still_stop():
    events: list[str] = []
    logged: list[dict] = []
    tree = InOrder()
    for part in (Recorded("backend", events), Recorded("broker", events, fails=True), Recorded("port", events)):
        part.setServiceParent(tree)
    tree.startService()
    globalLogPublisher.addObserver(logged.append)
    try:
        stopped = tree.stopService()
    finally:
        globalLogPublisher.removeObserver(logged.append)
    assert events[3:] == ["stop port", "stop broker", "stop backend"] and stopped.called
    assert [event["name"] for event in logged if event.get("log_failure")] == ["broker"]


def test_a_part_not_started_is_not_stopped():
    """A start that failed half-way: what never started is not stopped."""
    events: list[str] = []
    tree = InOrder()
    Recorded("started", events).setServiceParent(tree)
    never = Recorded("never", events)
    tree.startService()
    never.setServiceParent(tree)  # (starts it: the tree runs) ...
    never.running = False  # ... as if its start had raised
    tree.stopService()
    assert events == ["start started", "start never", "stop started"]


def test_a_step_is_two_functions_and_its_stop_is_awaited():
    done = Deferred()
    calls: list[str] = []
    step = Step("core", lambda: calls.append("start"), lambda: done)
    step.startService()
    stopped = step.stopService()
    assert calls == ["start"] and not stopped.called
    done.callback(None)
    assert stopped.called


class Port:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def stopListening(self) -> None:
        self.events.append("closed")


def test_ports_bind_at_the_privileged_start_the_late_one_at_the_start_and_close_at_the_stop():
    events: list[str] = []

    def listen(name: str):
        return lambda: events.append(f"bound {name}") or Port(events)

    tree = InOrder()
    Listening("local", listen("local"), late=True).setServiceParent(tree)
    Listening("plain", listen("plain")).setServiceParent(tree)
    Listening("off", lambda: None).setServiceParent(tree)
    tree.privilegedStartService()
    assert events == ["bound plain"]
    tree.startService()
    assert events == ["bound plain", "bound local"]
    tree.stopService()
    assert events[2:] == ["closed", "closed"]


def documented_parts() -> list[str]:
    """The Gateway's children as docs/architecture.md's service tree draws them (``│  ├─ name   what it does``)."""
    text = (SOURCE_ROOT / "docs" / "architecture.md").read_text()
    tree = text[text.index("daemon (InOrder"):]
    tree = tree[:tree.index("```")]
    names = []
    for line in tree.splitlines():
        drawn = re.match(r"│  [├└]─ (.+?)(?:\s{2,}|$)", line)
        if drawn:
            names += [re.sub(r" \(.*\)$", "", name) for name in drawn.group(1).split(", ")]
    return names


def test_the_gateways_tree_is_in_the_documented_order():
    gateway = Gateway(GatewayConfig(), reactor=None)
    assert [part.name for part in gateway] == documented_parts() == [
        "core", "front ends", "monitor", "workers", "local_socket", "port", "ssl_port", "named_socket",
        "collector_port", "metrics_port", "announce"]
