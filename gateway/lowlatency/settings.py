"""The ``[carod]`` knobs: carod's own names in lower case, and the ones the gateway adds (README, "Low-latency jobs
over AMQP").  carod's daemon-side knobs that have no meaning here (the startd hook socket, the broker-held lease, its
own log) are accepted and ignored, with one log line each, so that a site's carod.conf translates as it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.logger import Logger

from gateway.sections import read_section

log = Logger()

#: carod's knobs for the hook socket, its lease and its log: nothing here uses them
IGNORED = ("carod_ip", "carod_port", "carod_queued_connections", "carod_lease_time", "carod_lease_check_interval",
           "carod_log")


class CarodSettingError(ValueError):
    pass


@dataclass(frozen=True)
class CarodSettings:
    enable_carod: bool = False
    carod_broker_ip: str = "127.0.0.1"
    carod_broker_port: int = 5672
    carod_broker_queue: str = "grid"
    carod_broker_user: str = "guest"
    carod_broker_password: str = "guest"
    carod_broker_vhost: str = "/"
    carod_broker_heartbeat: int = 30
    carod_rejected_queue: str = ""  # "": <queue>.rejected
    carod_prefetch: int = 1
    carod_max_jobs: int = 0  # 0: the backend's slots
    carod_max_redeliveries: int = 3
    carod_reconnect_max: int = 60
    carod_update_interval: int = 30  # 0: no periodic JobStatus 2 replies
    carod_default_owner: str = "nobody"
    carod_trust_owner_header: bool = False
    carod_max_input_bytes: int = 16 * 1024 * 1024
    carod_max_result_bytes: int = 16 * 1024 * 1024

    @property
    def rejected_queue(self) -> str:
        return self.carod_rejected_queue or f"{self.carod_broker_queue}.rejected"


#: inclusive lower bounds of the numeric knobs
_MINIMA = {"carod_broker_port": 1, "carod_broker_heartbeat": 0, "carod_prefetch": 1, "carod_max_jobs": 0,
           "carod_max_redeliveries": 0, "carod_reconnect_max": 1, "carod_update_interval": 0,
           "carod_max_input_bytes": 0, "carod_max_result_bytes": 0}


def carod_settings(values: dict[str, Any], where: str) -> CarodSettings:
    """The ``[carod]`` section as settings (raises :class:`CarodSettingError` naming the knob)."""
    for key in IGNORED:
        if key in values:
            log.info("{where}: {key} is carod's and has no meaning here (no startd hooks, no broker-held lease); "
                     "ignored", where=where, key=key)
    chosen = {key: value for key, value in values.items() if key not in IGNORED}
    settings = read_section(CarodSettings, "carod", chosen, where, _MINIMA, CarodSettingError)
    if not settings.carod_broker_queue or settings.rejected_queue == settings.carod_broker_queue:
        raise CarodSettingError(f"{where} [carod]: the work queue needs a name, and the rejected queue another one")
    if settings.carod_default_owner == "root":
        raise CarodSettingError(f"{where} [carod] carod_default_owner must not be root: low-latency jobs never "
                                f"run as root")
    return settings
