"""What the agent tells consoles unasked: every ``qmf_update_interval`` seconds, a ``_data_indication`` of the
objects whose values changed since it last told them (new ones included) and of those that are gone, as
HTCondor's QMF plugins published their objects' updates, so that a console that receives objects
(``qmf.console.Session(rcvObjects=True)`` and its ``objectProps``) follows the queue without asking.

Only the objects whose values follow the queue are watched: the scheduler's and submitters' counts and, when
``qmf_publish_submissions`` is on, the submissions.  Job objects are not (a queue of many jobs would make every
interval read them all); a console asks for them by class or id."""

from __future__ import annotations

from typing import Any

from .objects import Published
from .schema import SCHEDULER, SUBMISSION, SUBMITTER, QmfClass

#: the classes whose objects' changes are published
WATCHED: tuple[QmfClass, ...] = (SCHEDULER, SUBMITTER, SUBMISSION)


def indication_subject(klass: QmfClass) -> str:
    """The topic subject of a class's data indications (``agent.ind.data.<package>.<class>``, dots in the package
    as underscores, as the map protocol names its topics)."""
    return f"agent.ind.data.{klass.package.replace('.', '_')}.{klass.name}"


class ChangedObjects:
    """The values last told for each watched object, by object name."""

    def __init__(self) -> None:
        self._told: dict[str, Published] = {}

    def forget(self) -> None:
        """Tell everything again next time (after the broker connection comes back, consoles may have missed it)."""
        self._told.clear()

    def changes(self, found: list[Published]) -> tuple[list[Published], list[Published]]:
        """The objects of ``found`` whose values differ from those last told (or never told), and the objects told
        before that ``found`` no longer holds; both are taken as told."""
        now = {item.name: item for item in found}
        changed = [item for name, item in now.items() if _values(self._told.get(name)) != item.values]
        gone = [item for name, item in self._told.items() if name not in now]
        self._told = now
        return changed, gone


def _values(item: Published | None) -> dict[str, Any] | None:
    return None if item is None else item.values
