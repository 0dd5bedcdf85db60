"""The DAG file language (parsing only)."""

from __future__ import annotations

import pytest

from backends.local.dag.language import DagSyntaxError, apply_done, read


def parse(tmp_path, text: str):
    path = tmp_path / "x.dag"
    path.write_text(text)
    return read(path)


def test_every_supported_command(tmp_path):
    dag = parse(tmp_path, """
# a comment
Job A a.sub DIR sub NOOP
JOB B b.sub DONE
JOB C c.sub
JOB D \\
    d.sub
PARENT A B CHILD C D
RETRY C 3 UNLESS-EXIT 42
VARS C name="value with \\"quotes\\" and \\\\" other="2"
SCRIPT PRE C pre.sh $JOB "two words"
SCRIPT POST C post.sh $RETURN
PRE_SKIP C 5
ABORT-DAG-ON D 9 RETURN 11
CATEGORY C heavy
MAXJOBS heavy 2
DONE D
""")
    a, b, c, d = (dag.nodes[n] for n in "ABCD")
    assert a.directory == "sub" and a.noop and b.done and d.done and d.submit_file == "d.sub"
    assert c.parents == ["A", "B"] and a.children == ["C", "D"]
    assert (c.retries, c.retry_unless_exit) == (3, 42)
    assert c.variables == {"name": 'value with "quotes" and \\', "other": "2"}
    assert (c.pre.executable, c.pre.arguments) == ("pre.sh", ["$JOB", "two words"])
    assert c.post.arguments == ["$RETURN"] and c.pre_skip == 5 and c.category == "heavy"
    assert dag.abort_on["D"].value == 9 and dag.abort_on["D"].dag_return == 11 and dag.max_jobs == {"heavy": 2}
    assert dag.directory_of(a) == tmp_path / "sub"


@pytest.mark.parametrize("text, message", [
    ("JOB A a.sub\nSPLICE S s.dag\n", "x.dag:2: unsupported DAG command 'SPLICE'"),
    ("JOB A a.sub\nCONFIG dagman.config\n", "unsupported DAG command 'CONFIG'"),
    ("PARENT A CHILD B\n", "no node named 'A'"),
    ("JOB A a.sub\nJOB A b.sub\n", "defined twice"),
    ("JOB A a.sub\nRETRY A many\n", "must be an integer"),
    ("JOB A a.sub\nPARENT A\n", "without CHILD"),
    ("JOB A a.sub\nVARS A novalue\n", "expected name=\"value\""),
    ("JOB A a.sub\nSCRIPT DEFER 1 2 PRE A x\n", "not supported"),
    ("JOB A a.sub BOGUS\n", "unexpected 'BOGUS'"),
])
def test_errors_name_the_file_and_line(tmp_path, text, message):
    with pytest.raises(DagSyntaxError) as error:
        parse(tmp_path, text)
    assert message in str(error.value)


def test_a_rescue_dag_marks_nodes_done(tmp_path):
    dag = parse(tmp_path, "JOB A a.sub\nJOB B b.sub\n")
    rescue = tmp_path / "x.dag.rescue001"
    rescue.write_text("# Rescue DAG\nDONE A\n")
    assert apply_done(dag, rescue) == 1 and dag.nodes["A"].done and not dag.nodes["B"].done


def test_script_for_all_nodes(tmp_path):
    dag = parse(tmp_path, "JOB A a.sub\nJOB B b.sub\nSCRIPT POST ALL_NODES check.sh $JOB\n")
    assert all(node.post.executable == "check.sh" for node in dag.nodes.values())
