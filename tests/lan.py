"""Several hosts on one machine for tests: network namespaces (``ip netns``; the tests run as root) joined by a bridge
in a namespace of its own, a LAN on which every host reaches every other with no routing and nothing changed in this
machine's own network but one veth end.  This machine's namespace can be one of the hosts."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@dataclass(frozen=True)
class LanHost:
    name: str
    address: str
    namespace: str | None  # None: this machine's own namespace

    def command(self, *command: str) -> list[str]:
        """``command`` as run on this host."""
        return ["ip", "netns", "exec", self.namespace, *command] if self.namespace else list(command)

    def pids(self) -> list[int]:
        """The processes running on this host (a namespace's only)."""
        if self.namespace is None:
            raise ValueError("this machine's own processes are not one host's")
        done = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True, check=False)
        return [int(pid) for pid in done.stdout.split()]

    def crash(self) -> None:
        """Every process of the host killed at once, as when a machine loses its power."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Lan:
    """``add(name)`` makes a host with the next address; ``remove()`` takes every namespace and link away."""

    def __init__(self, tag: str) -> None:
        self.tag = tag  # short: interface names are at most 15 characters
        self.subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() // 50 % 250}"
        self.switch = f"bb{tag}sw"
        self.hosts: list[LanHost] = []
        self._namespaces = [self.switch]
        ip("netns", "add", self.switch)
        ip("netns", "exec", self.switch, "ip", "link", "add", "br0", "type", "bridge")
        ip("netns", "exec", self.switch, "ip", "link", "set", "br0", "up")

    def add(self, name: str, *, own_namespace: bool = True) -> LanHost:
        index = len(self.hosts) + 1
        host = LanHost(name, f"{self.subnet}.{index}", f"bb{self.tag}{name}" if own_namespace else None)
        outside, inside = f"bb{self.tag}{index}s", f"bb{self.tag}{index}h"
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", outside, "netns", self.switch)
        ip("netns", "exec", self.switch, "ip", "link", "set", outside, "master", "br0", "up")
        if host.namespace:
            ip("netns", "add", host.namespace)
            self._namespaces.append(host.namespace)
            ip("link", "set", inside, "netns", host.namespace)
        on_host = host.command("ip")
        ip(*on_host[1:], "addr", "add", f"{host.address}/24", "dev", inside)
        ip(*on_host[1:], "link", "set", inside, "up")
        if host.namespace:
            ip(*on_host[1:], "link", "set", "lo", "up")
        self.hosts.append(host)
        return host

    def remove(self) -> None:
        for host in self.hosts:
            if host.namespace:
                host.crash()
        for namespace in self._namespaces:
            subprocess.run(["ip", "netns", "del", namespace], check=False, capture_output=True)  # and its links
