"""DAG node submit files become the ads HTCondor's own submit language makes (the ``htcondor`` wheel's
``Submit(...).jobs()`` as the oracle), with the cluster the node's job got; what cannot be one node is refused."""

from __future__ import annotations

import os

import classad2
import htcondor
import pytest

from backends.local.dag.submit import SubmitError, node_ads

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")


def test_a_node_file_becomes_the_ads_of_the_submit_language_with_the_nodes_cluster(tmp_path):
    # in the spirit of the manual's "DAGMan Workflows" node files: $(JOB) from the DAG, $(Cluster) the node's
    text = f"executable = /bin/echo\narguments = $(JOB)\noutput = $(JOB).$(Cluster).$(Process).out\n" \
           f"initialdir = {tmp_path}\nqueue 2\n"
    (tmp_path / "A.sub").write_text(text)
    ads = node_ads(tmp_path / "A.sub", tmp_path, {"JOB": "A"}, 314)
    description = htcondor.Submit(text)
    description["JOB"] = "A"
    expected = [classad2.parseOne(ad.printOld()) for ad in description.jobs(count=2, clusterid=314)]
    assert [ad["Out"] for ad in ads] == ["A.314.0.out", "A.314.1.out"]
    assert [(ad["Args"], ad["Cmd"], ad["Iwd"]) for ad in ads] == [(ad["Args"], ad["Cmd"], ad["Iwd"]) for ad in expected]


def test_a_second_queue_statement_is_refused_not_dropped(tmp_path):
    (tmp_path / "A.sub").write_text("executable = /bin/true\nqueue\narguments = again\nqueue\n")
    with pytest.raises(SubmitError, match="only one queue statement"):
        node_ads(tmp_path / "A.sub", tmp_path, {}, 1)
