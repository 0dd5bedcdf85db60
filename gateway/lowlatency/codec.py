"""A low-latency job message and its replies, as MRG Grid's carod defined them, on AMQP 0-9-1.

A job's attributes are the message's application headers: the name is the attribute, the value its ClassAd text
(``"\\"/bin/echo\\""`` a string, ``TRUE`` an expression), or an AMQP integer, boolean or decimal for that literal.
Replies carry the job ad back the same way, integers as AMQP integers (pika cannot encode floats, and carod sent
everything else as text anyway).  Nothing here talks to the broker or the core.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import classad2

from gateway.core.adstruct import Attr, AttrType, ad_to_struct
from gateway.core.auth import replaced_at_submit, schedd_owned
from jobmodel.values import excerpt

#: the reason carod gave for a message without a message_id, word for word (its clients may look for it)
NO_MESSAGE_ID = "Work Request does not have a unique message_id and is unusable.  Discarding"

#: attributes a message may not set: the front end's own bookkeeping (AMQPID and the rest), and where and how long
#: the job lives (its own sandbox, kept for output_retention)
FRONT_END_OWNED = frozenset({"iwd", "leavejobinqueue", "transferinput", "shouldtransferfiles", "submission"})

#: the job's attributes the gateway adds to every low-latency job
AMQP_ID = "AMQPID"
AMQP_REPLY_TO = "AMQPReplyTo"
#: set once the broker confirmed the final reply: a restart sends no final for such a job
AMQP_FINAL_SENT = "AMQPFinalSent"
#: set when the job came from a redelivered message this gateway had not taken before: another gateway may have
#: committed it and died before its ack, so this job's final may repeat that one's and is marked ``AMQPResent``
AMQP_REDELIVERED = "AMQPRedelivered"


class BadMessage(ValueError):
    """A message that cannot become a job; the text is the reason its error reply gives."""


@dataclass(frozen=True)
class ReplyAddress:
    exchange: str
    routing_key: str

    def __str__(self) -> str:
        return f"/exchange/{self.exchange}/{self.routing_key}" if self.exchange else f"/queue/{self.routing_key}"


_NAME = re.compile(r"[^/\s]{1,255}")


def reply_address(reply_to: str | None) -> ReplyAddress:
    """Where replies go, from the forms clients use: ``EXCHANGE/KEY`` (Qpid's address form of carod's
    ``ReplyTo(exchange, key)``), ``/exchange/EXCHANGE/KEY`` (RabbitMQ's), ``/queue/Q`` or a bare ``Q`` (the default
    exchange routes by queue name)."""
    text = reply_to or ""
    parts = text.split("/")
    if len(parts) == 4 and parts[:2] == ["", "exchange"] and _all_names(parts[2:3]) and _key(parts[3]):
        return ReplyAddress(parts[2], parts[3])
    if len(parts) == 3 and parts[:2] == ["", "queue"] and _all_names(parts[2:]):
        return ReplyAddress("", parts[2])
    if len(parts) == 2 and _all_names(parts[:1]) and _key(parts[1]):
        return ReplyAddress(parts[0], parts[1])
    if len(parts) == 1 and _all_names(parts):
        return ReplyAddress("", parts[0])
    raise BadMessage(f"reply_to {excerpt(text)} is not EXCHANGE/KEY, /exchange/EXCHANGE/KEY, /queue/QUEUE or QUEUE")


def _all_names(parts: Iterable[str]) -> bool:
    return all(_NAME.fullmatch(part) for part in parts)


def _key(text: str) -> bool:
    return len(text) <= 255 and not any(ch.isspace() for ch in text)


@dataclass(frozen=True)
class JobMessage:
    """What a message asks for: its attributes (typed for the core), and the Owner it names, if any."""

    attributes: tuple[Attr, ...]
    owner: str | None


def job_message(headers: Mapping[str, Any] | None) -> JobMessage:
    """The job a message's headers describe (raises :class:`BadMessage`).  ``x-*`` headers are the broker's and
    clients' own and are skipped, as are the attributes the schedd assigns (ids, QDate...) and the front end's;
    the values are checked by the core, under the gateway's expression limits, at submit."""
    attributes: list[Attr] = []
    owner: str | None = None
    for name, value in (headers or {}).items():
        if name.lower().startswith("x-"):
            continue
        if name == "Owner" or name.lower() == "owner":
            owner = _owner_header(value)
            continue
        if schedd_owned(name) or replaced_at_submit(name) or name.lower() in FRONT_END_OWNED \
                or name.lower().startswith("amqp"):
            continue
        attributes.append(_attribute(name, value))
    names = {attr.name.lower() for attr in attributes}
    if "cmd" not in names:
        raise BadMessage("the job has no Cmd header (the program to run, as ClassAd text: \"\\\"/bin/echo\\\"\")")
    if "jobuniverse" not in names:
        attributes.append(Attr("JobUniverse", AttrType.INTEGER, "5"))
    if "requirements" not in names:
        attributes.append(Attr("Requirements", AttrType.EXPRESSION, "TRUE"))
    return JobMessage(tuple(attributes), owner)


def _attribute(name: str, value: Any) -> Attr:
    """One header as a typed attribute: ClassAd text, or an AMQP integer, boolean or number as that literal."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadMessage(f"header {excerpt(name)} is not UTF-8 text") from None
    if isinstance(value, str):
        return Attr(name, AttrType.EXPRESSION, value)
    if isinstance(value, bool):
        return Attr(name, AttrType.BOOLEAN, "true" if value else "false")
    if isinstance(value, int):
        return Attr(name, AttrType.INTEGER, str(value))
    if isinstance(value, (float, decimal.Decimal)):
        return Attr(name, AttrType.FLOAT, repr(float(value)))
    kind = "void" if value is None else type(value).__name__
    raise BadMessage(f"header {excerpt(name)} is an AMQP {kind}: give ClassAd text, an integer or a boolean")


def _owner_header(value: Any) -> str | None:
    """An Owner header's user name: a ClassAd string literal (carod's form) or plain text; empty is none."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise BadMessage("the Owner header must be text")
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            parsed = classad2.ExprTree(text).eval()
        except Exception:  # noqa: BLE001 - any unparsable text is the client's error
            raise BadMessage(f"the Owner header {excerpt(text)} is not a string") from None
        text = parsed if isinstance(parsed, str) else ""
    return text or None


# -- replies ------------------------------------------------------------------------------------------------
def reply_headers(ad: classad2.ClassAd, now: int, **extra: Any) -> dict[str, Any]:
    """A job ad as reply headers: integer literals as AMQP integers, strings quoted, the rest as ClassAd text."""
    headers: dict[str, Any] = {}
    for attr in ad_to_struct(ad, now):
        if attr.name in ("MyType", "TargetType", "ServerTime"):
            continue
        if attr.type is AttrType.INTEGER:
            headers[attr.name] = int(attr.value)
        elif attr.type is AttrType.STRING:
            headers[attr.name] = classad2.quote(attr.value)
        else:
            headers[attr.name] = attr.value
    headers.update(extra)
    return headers


def error_headers(reason: str, message_id: str | None) -> dict[str, Any]:
    headers = {"Error": classad2.quote(reason)}
    if message_id:
        headers[AMQP_ID] = classad2.quote(message_id)
    return headers


def error_body(reason: str) -> bytes:
    return f"ERROR:{reason}".encode()
