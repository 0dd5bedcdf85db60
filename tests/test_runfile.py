"""A run's file (``backends/local/runfile.py``): the gateway's spec line, then the launcher's appended lines, read
back as they are, and nothing of a line that does not parse (a launcher killed while appending it)."""

from __future__ import annotations

import json

from backends.local import runfile


def test_a_run_reads_back_as_the_gateway_and_its_launcher_wrote_it(tmp_path):
    path = tmp_path / runfile.NAME
    path.write_text(json.dumps({"executable": "/bin/true", "control": {"cpus": 1}}) + "\n")
    assert runfile.read(path) == runfile.Run({"executable": "/bin/true", "control": {"cpus": 1}}, None, None)
    runfile.append(path, {runfile.STARTED: [4321, 99], "at": 12.5})
    run = runfile.read(path)
    assert run.started == runfile.Started(4321, 99, 12.5) and run.ended is None
    runfile.append(path, {runfile.ENDED: {"exit_code": 3}}, sync=True)
    assert runfile.read(path).ended == {"exit_code": 3}


def test_no_file_is_a_run_nothing_is_known_of(tmp_path):
    assert runfile.read(tmp_path / "absent") == runfile.Run(None, None, None)


def test_lines_that_do_not_parse_are_not_read(tmp_path):
    """A line cut short, one that is no object, a start without its fields: as if never written."""
    path = tmp_path / runfile.NAME
    path.write_text("\n".join([
        '{"executable": "/bin/true"}',
        '[1, 2]',
        '{"started": [12]}',
        '{"started": ["x", 1], "at": 1}',
        '{"ended": "not a result"}',
        '{"started": [7, 8], "at": 3.0}',
        '{"ended": {"exit_co',
    ]))
    run = runfile.read(path)
    assert run == runfile.Run({"executable": "/bin/true"}, runfile.Started(7, 8, 3.0), None)


def test_a_spec_line_that_does_not_parse_is_no_spec(tmp_path):
    path = tmp_path / runfile.NAME
    path.write_text('{"executable": \n{"ended": {"exit_code": 0}}\n')
    assert runfile.read(path) == runfile.Run(None, None, {"exit_code": 0})


def test_bytes_that_are_no_text_spoil_only_their_line(tmp_path):
    """(A machine that went down while a block was written: recovery reads the rest, and requeues a run whose end
    is unreadable rather than failing on the file.)"""
    path = tmp_path / runfile.NAME
    path.write_bytes(b'{"executable": "/bin/true"}\n{"started": [5, 6], "at": 1.0}\n{"ended": {"exit_code": \xff}}\n')
    assert runfile.read(path) == runfile.Run({"executable": "/bin/true"}, runfile.Started(5, 6, 1.0), None)
    assert runfile.read(path, spec=False) == runfile.Run(None, runfile.Started(5, 6, 1.0), None)
