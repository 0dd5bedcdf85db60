"""Small helpers for tests that drive the gateway through a zeep condorSchedd client."""

from __future__ import annotations

from typing import Any


def ad(**attributes: Any) -> dict:
    """A ClassAdStruct from keyword arguments: str -> STRING, bool -> BOOLEAN, int -> INTEGER, float -> FLOAT,
    and ``expr("...")`` -> EXPRESSION."""
    items = []
    for name, value in attributes.items():
        if isinstance(value, Expr):
            kind, text = "EXPRESSION-ATTR", value.text
        elif isinstance(value, bool):
            kind, text = "BOOLEAN-ATTR", "TRUE" if value else "FALSE"
        elif isinstance(value, int):
            kind, text = "INTEGER-ATTR", str(value)
        elif isinstance(value, float):
            kind, text = "FLOAT-ATTR", str(value)
        else:
            kind, text = "STRING-ATTR", value
        items.append({"name": name, "type": kind, "value": text})
    return {"item": items}


class Expr:
    def __init__(self, text: str) -> None:
        self.text = text


def expr(text: str) -> Expr:
    return Expr(text)


def as_dict(struct: Any) -> dict[str, tuple[str, str]]:
    """{name: (type, value)} of a ClassAdStruct answer."""
    return {item.name: (item.type, item.value) for item in (struct.item if struct is not None else [])}


def values(struct: Any) -> dict[str, str]:
    return {name: value for name, (_, value) in as_dict(struct).items()}


def begin(schedd: Any, duration: int = 60) -> Any:
    answer = schedd.beginTransaction(duration)
    assert answer.status.code == "SUCCESS", answer
    return answer.transaction


def new_job(schedd: Any, txn: Any) -> tuple[int, int]:
    cluster = schedd.newCluster(txn)
    assert cluster.status.code == "SUCCESS", cluster
    proc = schedd.newJob(txn, cluster.integer)
    assert proc.status.code == "SUCCESS", proc
    return cluster.integer, proc.integer


def submit_job(schedd: Any, files: dict[str, bytes] | None = None, **attributes: Any) -> tuple[int, int]:
    """beginTransaction .. commitTransaction for one job; returns (cluster, proc)."""
    txn = begin(schedd)
    cluster, proc = new_job(schedd, txn)
    for name, data in (files or {}).items():
        assert schedd.declareFile(txn, cluster, proc, name, len(data), "NOHASH", None).code == "SUCCESS"
        assert schedd.sendFile(txn, cluster, proc, name, 0, data).code == "SUCCESS"
    attributes.setdefault("Cmd", "/bin/true")
    attributes.setdefault("Requirements", expr("TRUE"))
    answer = schedd.submit(txn, cluster, proc, ad(**attributes))
    assert answer.status.code == "SUCCESS", answer
    committed = schedd.commitTransaction(txn)
    assert committed.code == "SUCCESS", committed
    return cluster, proc
