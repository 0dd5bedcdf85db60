"""Requests made as another local user, for tests of what the gateway lets one user do to another's jobs (needs
root)."""

from __future__ import annotations

import http.client
import os
import pwd


def post_as(user: str, port: int, path: str, body: str, content_type: str = "text/xml") -> bytes:
    """A POST made by a forked child running as ``user`` (a real other caller, identified by its socket's owner;
    the child cannot exec Python: the interpreter is not readable by other users everywhere), its answer read back
    through a pipe."""
    account = pwd.getpwnam(user)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: switch user, call, hand the answer back, and never return into pytest
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", path, body, {"Content-Type": content_type})
            answer = memoryview(connection.getresponse().read())
            while answer:
                answer = answer[os.write(write, answer):]
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        answer = stream.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    return answer
