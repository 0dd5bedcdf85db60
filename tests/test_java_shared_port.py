"""A Java Axis 1.4 program through condor_shared_port: the generated stubs speak plain HTTP and cannot send the
connect request, so they go through the shared port's HTTP forwarding (``SHARED_PORT_HTTP_FORWARDING_ID``, which
passes a connection that starts like HTTP to that id unread).  What this exercises: the gateway's named socket and
the passed socket, with a real Java client's HTTP/1.0 requests, a job run and its output fetched.  The stand-in is
:class:`gateway.testing_daemons.SharedPortStandIn`."""

from __future__ import annotations

import shutil

import pytest

from gateway.testing_daemons import SharedPortStandIn, short_directory, start_behind_shared_port
from tests.test_execution import RUNNER
from tests.test_java_clients import java_clients, run_java  # noqa: F401 (java_clients is a fixture)

#: its tests start gateway processes of their own (the mark: gateway.testing.GATEWAY_MARK)
pytestmark = [pytest.mark.gateway, pytest.mark.java]

SOCK_ID = "birdbath_java"


@pytest.fixture(scope="module")
def forwarding(tmp_path_factory):
    directory = short_directory()
    gateway = start_behind_shared_port(tmp_path_factory.mktemp("java-shared"), directory, SOCK_ID,
                                       RUNNER + "[birdbath]\nqueue_all_users_trusted = true\n")
    try:
        with SharedPortStandIn(directory, http_forward_id=SOCK_ID) as standin:
            yield standin
    finally:
        gateway.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_axis_submits_a_job_and_fetches_its_output_through_the_shared_port(java_clients, forwarding,  # noqa: F811
                                                                           tmp_path):
    program = tmp_path / "shout.sh"
    program.write_text('#!/bin/sh\ntr a-z A-Z < "$1" > shouted.txt\necho "read $1"\nexit 3\n')
    (tmp_path / "words.txt").write_text("through the shared port\n")
    result = run_java(java_clients, "axis-ours", "SubmitJob", f"http://127.0.0.1:{forwarding.port}/",
                      str(program), str(tmp_path / "words.txt"), str(tmp_path / "out"))
    assert result.returncode == 3, result.stdout + result.stderr
    assert (tmp_path / "out" / "shouted.txt").read_text() == "THROUGH THE SHARED PORT\n"
    assert forwarding.refusals == [] and forwarding.requests == []  # all of it forwarded unread
