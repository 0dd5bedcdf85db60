"""What a front end is to the gateway: one object, found under the ``birdbath.frontends`` entry point group (as
backends are under ``birdbath.backends``), that mounts its paths on the sites and runs what it runs.

Adding a front end is one package and one line: the package defines a :class:`FrontEnd` and the line names it,
``[project.entry-points."birdbath.frontends"]`` in its ``pyproject.toml`` (``docs/architecture.md``, "Adding a front
end", shows one; ``tests/test_frontends.py`` keeps it working).  Every process that serves connections mounts every
installed front end (:meth:`FrontEnd.mount`: the core alone, and each worker with ``workers = N``, whose core
services are its link's stand-ins); what a front end runs beside the sites (a broker's consumer, an agent) runs in
the core alone (:meth:`FrontEnd.service`), started after the core's services and stopped before them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from prometheus_client.core import Metric
from twisted.application.service import Service

from gateway.core.services import CollectorContract, DescribedContract, ScheddContract, SubmissionsContract
from gateway.routes import Routes

#: the entry point group front ends are installed under
ENTRY_POINT_GROUP = "birdbath.frontends"


@dataclass(frozen=True)
class Core:
    """What a front end is given: the gateway's configuration, the reactor, and the core's services (in a worker,
    their stand-ins that call the core over its link: the same methods)."""

    #: the gateway's configuration (:class:`gateway.config.GatewayConfig`, which reads the front ends' sections: this
    #: module imports it not)
    config: Any
    reactor: Any
    #: jobs, transactions (``submit_transaction``), queries (:class:`gateway.core.schedd.BirdbathSchedd`)
    schedd: ScheddContract
    #: the pool's ads (:class:`gateway.core.collector.BirdbathCollector`)
    collector: CollectorContract
    #: the submission API's operations (:class:`gateway.core.submissions.SubmissionService`)
    submissions: SubmissionsContract
    #: submissions whose jobs wait for their input (:class:`gateway.core.described.DescribedSubmissions`)
    described: DescribedContract
    #: :class:`gateway.monitoring.web.Watched`: the metrics and readiness pages read it
    monitor: Any
    #: runs a blocking function on the reactor's thread pool (a password check, an upload's reading)
    offload: Callable[..., Any]


@dataclass(frozen=True)
class Sites:
    """The trees a front end mounts on: the gateway's port (and its SSL port, local socket and shared port: one
    site), and the collector's own port (``collector_port``)."""

    gateway: Routes
    collector: Routes


class FrontEndService(Service):
    """What a front end runs beside the sites (a ``twisted.application`` service: started with the gateway, stopped
    before the core), and what it adds to ``/metrics`` and ``/readyz``."""

    def figures(self) -> Iterable[Metric]:
        """Its figures, read when ``/metrics`` is scraped."""
        return ()

    def problems(self) -> list[str]:
        """What keeps it from doing its work now (``/readyz``); empty when nothing does."""
        return []


class FrontEnd:
    """A protocol the gateway speaks.  Subclass it, override what applies, and install an instance under
    :data:`ENTRY_POINT_GROUP`."""

    #: its name, as its entry point names it and the log says it
    name = "front end"
    #: its section of the configuration file (``[carod]``), read by :meth:`read_section`; None: it has none
    section: str | None = None

    def read_section(self, values: dict[str, Any], where: str) -> Any:
        """Its section's settings, checked (raises ValueError naming the knob); ``values`` empty: its defaults."""
        raise NotImplementedError(f"the {self.name} front end names a section but reads none")

    def settings(self, config: Any) -> Any:
        """Its section's settings as ``config`` read them (its defaults when the file has no such section)."""
        assert self.section is not None
        read = config.sections.get(self.section)
        return read if read is not None else self.read_section({}, "defaults")

    def enabled(self, config: Any) -> bool:
        """Whether its configuration section switches it on (on by default)."""
        return True

    def mount(self, sites: Sites, core: Core) -> None:
        """Put its resources on the sites' trees (``sites.gateway.mount(path, resource)``)."""

    def service(self, core: Core) -> FrontEndService | None:
        """What it runs in the core process beside the sites, not yet started; None when it runs nothing."""
        return None


class NoFrontEnd(ValueError):
    """An entry point of the group that names no :class:`FrontEnd`, or no front end installed at all."""


def installed() -> list[FrontEnd]:
    """The installed front ends, by name (the order they mount and start in)."""
    found = []
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda entry: entry.name):
        front_end = entry.load()
        if not isinstance(front_end, FrontEnd):
            raise NoFrontEnd(f"the {ENTRY_POINT_GROUP} entry point {entry.name!r} ({entry.value}) is no FrontEnd")
        found.append(front_end)
    if not found:  # a checkout installed before the group existed: its metadata lacks the entry points
        raise NoFrontEnd(f"no front end installed under {ENTRY_POINT_GROUP} (reinstall the gateway: pip install -e .)")
    return found
