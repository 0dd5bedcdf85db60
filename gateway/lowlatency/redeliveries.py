"""The poison guard: how many times a message came back redelivered before it became a job.

A message that kills the gateway while being taken (before its job is committed) comes back to the next gateway,
and would kill that one too, forever.  Only a redelivered message whose message_id is not a job yet is counted,
one small file per message_id, written durably before the message is handled: past ``carod_max_redeliveries`` it goes
to the rejected queue instead.  The usual path (a first delivery) writes nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


class Redeliveries:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, message_id: str) -> Path:
        return self.directory / hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()

    def bump(self, message_id: str) -> int:
        """Count one more redelivery of ``message_id`` (durably, before it is handled) and return the count."""
        path = self._path(message_id)
        try:
            count = int(path.read_text() or 0) + 1
        except (FileNotFoundError, ValueError):
            count = 1
        temporary = path.with_suffix(".new")
        with open(temporary, "w") as stream:
            stream.write(str(count))
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
        descriptor = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        return count

    def forget(self, message_id: str) -> None:
        """The message was handled (a job, an error reply or the rejected queue): its count goes."""
        self._path(message_id).unlink(missing_ok=True)
