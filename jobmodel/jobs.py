"""Names for HTCondor's job states and universes, so no module compares against bare numbers."""

from __future__ import annotations

import enum


class JobStatus(enum.IntEnum):
    IDLE = 1
    RUNNING = 2
    REMOVED = 3
    COMPLETED = 4
    HELD = 5
    TRANSFERRING_OUTPUT = 6
    SUSPENDED = 7


class Universe(enum.IntEnum):
    """``JobUniverse`` values; the names are the Birdbath ``UniverseType`` wire strings."""

    STANDARD = 1
    VANILLA = 5
    SCHEDULER = 7
    MPI = 8
    GRID = 9
    JAVA = 10
    PARALLEL = 11
    LOCAL = 12
    VM = 13


class JobAction(enum.Enum):
    """What a client may do to a queued job."""

    HOLD = "hold"
    RELEASE = "release"
    REMOVE = "remove"
    SUSPEND = "suspend"
    CONTINUE = "continue"

    @property
    def done(self) -> str:
        """The past participle, for messages ("cannot be held in its state")."""
        return "held" if self is JobAction.HOLD else f"{self.value.rstrip('e')}ed"


# Attributes that a real schedd (7.0.4+) never sends to SOAP clients.
PRIVATE_ATTRIBUTES = frozenset(
    {"Capability", "ChildClaimIds", "ClaimId", "ClaimIdList", "ClaimIds", "PairedClaimId", "TransferKey"}
)


class HoldCode(enum.IntEnum):
    """``HoldReasonCode`` values (HTCondor's CONDOR_HOLD_CODE) that the gateway produces."""

    UNSPECIFIED = 0
    USER_REQUEST = 1
    JOB_POLICY = 3
    FAILED_TO_CREATE_PROCESS = 6
    UNABLE_TO_OPEN_OUTPUT = 7
    UNABLE_TO_OPEN_INPUT = 8
    TRANSFER_OUTPUT_ERROR = 12
    TRANSFER_INPUT_ERROR = 13
    IWD_ERROR = 14
    JOB_OUT_OF_RESOURCES = 34  # over its memory request (the starter's cgroup or usage check)
