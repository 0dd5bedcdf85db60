"""The ``[qmf]`` knobs: HTCondor's QMF plugin knob names in lower case (``QMF_BROKER_HOST`` is ``qmf_broker_host``),
and ``enable_qmf``, which turns the front end on (HTCondor loaded its plugins instead)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.sections import read_section

#: the SASL mechanisms the agent logs in with; PLAIN means the broker authenticates its clients, so a console's
#: user_id is who it is (qpidd refuses a message whose user_id is not its sender's login)
MECHANISMS = ("ANONYMOUS", "PLAIN")


class QmfSettingError(ValueError):
    pass


@dataclass(frozen=True)
class QmfSettings:
    enable_qmf: bool = False
    qmf_broker_host: str = "localhost"
    qmf_broker_port: int = 5672
    qmf_broker_auth_mech: str = "ANONYMOUS"
    qmf_broker_username: str = ""
    qmf_broker_password_file: str = ""  # its first line is the password
    qmf_update_interval: int = 10  # seconds between heartbeats (consoles drop an agent that misses a few)
    qmf_publish_submissions: bool = True  # Submission objects (and the JobServer that is their parent)

    @property
    def authenticated(self) -> bool:
        """Whether the broker authenticates the consoles too (then their user_id is their identity)."""
        return self.qmf_broker_auth_mech != "ANONYMOUS"

    def password(self) -> str | None:
        if not self.qmf_broker_password_file:
            return None
        lines = Path(self.qmf_broker_password_file).read_text().splitlines()
        return lines[0] if lines else ""


_MINIMA = {"qmf_broker_port": 1, "qmf_update_interval": 1}


def qmf_settings(values: dict[str, Any], where: str) -> QmfSettings:
    """The ``[qmf]`` section as settings (raises :class:`QmfSettingError` naming the knob)."""
    if isinstance(values.get("qmf_broker_auth_mech"), str):
        values = {**values, "qmf_broker_auth_mech": values["qmf_broker_auth_mech"].upper()}
    settings = read_section(QmfSettings, "qmf", values, where, _MINIMA, QmfSettingError)
    if settings.qmf_broker_auth_mech not in MECHANISMS:
        raise QmfSettingError(f"{where} [qmf] qmf_broker_auth_mech must be one of {', '.join(MECHANISMS)}, not "
                              f"{settings.qmf_broker_auth_mech!r}")
    if settings.authenticated and not (settings.qmf_broker_username and settings.qmf_broker_password_file):
        raise QmfSettingError(f"{where} [qmf] qmf_broker_auth_mech {settings.qmf_broker_auth_mech} needs "
                              f"qmf_broker_username and qmf_broker_password_file")
    try:
        settings.password()
    except (OSError, UnicodeDecodeError) as exc:
        raise QmfSettingError(f"{where} [qmf] qmf_broker_password_file cannot be read: {exc}") from None
    return settings
