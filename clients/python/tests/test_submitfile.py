"""Submit description files mean what condor_submit makes of them.

The examples are written in the spirit of the HTCondor manual's (24.0): "Submitting a Job" (its sample submit
description files: one job, many jobs with ``$(Process)``, several ``queue`` statements), "condor_submit" (the
``queue ... from`` forms, ``initialdir``, the cluster rule for a changed ``executable``) and "Submitting Jobs Without
a Shared File System" (``transfer_input_files``, ``-spool``).  The oracle is HTCondor's own submit language: the
``htcondor`` wheel's ``Submit(...).jobs(clusterid=...)``, fed one ``queue`` statement at a time.
"""

from __future__ import annotations

import os

import htcondor
import pytest

from birdbath_client import submitfile
from birdbath_client.ads import to_struct
from birdbath_client.spooling import places, spooled
from birdbath_client.submitfile import SubmitFileError

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")


def oracle(text: str, cluster: int, first_proc: int = 0) -> list[dict]:
    """What HTCondor's submit language makes of one statement (plain values, schedd-owned attributes left out)."""
    description = htcondor.Submit(text)
    arguments = description.getQArgs().split()
    count = int(arguments[0]) if arguments and arguments[0].isdigit() else 1
    items = list(description.itemdata() or [])
    ads = description.jobs(count=count, clusterid=cluster, procid=first_proc,
                           **({"itemdata": iter(items)} if items else {}))
    return [submitfile._plain(ad) for ad in ads]


def comparable(ads: list[dict]) -> list[dict]:
    """Leave out what differs from one translation to the next (the submit time's derived values)."""
    return [{name: value for name, value in ad.items() if name not in ("QDate", "EnteredCurrentStatus")}
            for ad in ads]


@pytest.fixture
def directory(tmp_path):
    (tmp_path / "analyze").write_text("#!/bin/sh\ncat \"$@\"\n")
    (tmp_path / "analyze").chmod(0o755)
    for name in ("data.in", "a.dat", "b.dat"):
        (tmp_path / name).write_text(name + "\n")
    return tmp_path


def write(directory, text: str):
    path = directory / "job.sub"
    path.write_text(text)
    return path


def test_one_job_as_the_manuals_first_example(directory):
    # "Submitting a Job": an executable, its arguments, the three files and a log, one queue statement
    text = (f"executable = {directory}/analyze\narguments = data.in\ninput = data.in\noutput = analyze.out\n"
            f"error = analyze.err\nlog = analyze.log\ninitialdir = {directory}\nqueue\n")
    ads = submitfile.job_ads(write(directory, text), 812)
    assert comparable(ads) == comparable(oracle(text, 812))
    assert ads[0]["Out"] == "analyze.out" and ads[0]["Iwd"] == str(directory)


def test_cluster_and_process_expand_to_the_cluster_the_schedd_gave(directory):
    # "Submitting a Job": many jobs of one description, told apart by $(Cluster) and $(Process)
    text = (f"executable = {directory}/analyze\noutput = out.$(Cluster).$(Process)\nlog = run.$(ClusterId).log\n"
            f"initialdir = {directory}\nqueue 3\n")
    ads = submitfile.job_ads(write(directory, text), 4071)
    assert [ad["Out"] for ad in ads] == ["out.4071.0", "out.4071.1", "out.4071.2"]
    assert {ad["UserLog"] for ad in ads} == {f"{directory}/run.4071.log"}
    assert comparable(ads) == comparable(oracle(text, 4071))


def test_every_queue_statement_counts_with_the_commands_in_force_there(directory):
    # "condor_submit": several queue statements in one file, the commands between them changing what follows
    head = f"executable = {directory}/analyze\ninitialdir = {directory}\n"
    first = "arguments = a.dat\noutput = a.$(Process).out\nqueue 2\n"
    second = "arguments = b.dat\noutput = b.$(Process).$(Step).out\nqueue 1\n"
    ads = submitfile.job_ads(write(directory, head + first + second), 9)
    assert [ad["Args"] for ad in ads] == ["a.dat", "a.dat", "b.dat"]
    assert [ad["Out"] for ad in ads] == ["a.0.out", "a.1.out", "b.2.0.out"]  # Process goes on, Step restarts
    assert comparable(ads) == comparable(oracle(head + first, 9) + oracle(head + first[:-8] + second, 9, 2))


def test_an_item_list_statement_and_the_statement_after_it(directory):
    # "condor_submit": queue <var> from ( ... ), then a plain queue with the variable's last setting gone
    head = f"executable = {directory}/analyze\ninitialdir = {directory}\n"
    listed = "arguments = $(name)\nqueue name from (\n  a.dat\n  b.dat\n)\n"
    plain = "arguments = data.in\nqueue\n"
    ads = submitfile.job_ads(write(directory, head + listed + plain), 30)
    assert [ad["Args"] for ad in ads] == ["a.dat", "b.dat", "data.in"]
    assert comparable(ads) == comparable(oracle(head + listed, 30) + oracle(head + plain, 30, 2))


def test_a_changed_executable_starts_a_new_cluster(directory):
    # "condor_submit": a cluster is the jobs between queue statements for which the executable is not changed
    text = (f"initialdir = {directory}\nexecutable = {directory}/analyze\nqueue 2\n"
            "executable = /bin/true\nqueue\n")
    made = submitfile.clusters(write(directory, text))
    assert [[ad["Cmd"] for ad in cluster.ads(number)] for number, cluster in enumerate(made, 1)] == [
        [f"{directory}/analyze"] * 2, ["/bin/true"]]
    with pytest.raises(SubmitFileError, match="2 clusters"):
        submitfile.job_ads(write(directory, text), 1)


def test_a_missing_executable_is_refused_as_condor_submit_refuses_it(directory):
    text = f"executable = {directory}/nowhere\nqueue\n"
    with pytest.raises(SubmitFileError) as refused:
        submitfile.job_ads(write(directory, text), 1)
    assert str(refused.value) == f"ERROR: Can't open \"{directory}/nowhere\"  with flags 00 (No such file or directory)"


def test_a_missing_input_file_is_refused_when_it_is_transferred(directory):
    # "Submitting Jobs Without a Shared File System": transfer_input_files names files condor_submit checks
    text = (f"executable = {directory}/analyze\nshould_transfer_files = YES\n"
            "transfer_input_files = a.dat, missing.dat\nqueue\n")
    with pytest.raises(SubmitFileError, match=r"Can't open \".*/missing.dat\"  with flags 00 \(No such file"):
        submitfile.job_ads(write(directory, text), 1)
    not_transferred = text.replace("YES", "NO")
    with pytest.raises(SubmitFileError, match='^ERROR: you specified files you want Condor to transfer via '
                                              '"transfer_input_files", but you disabled should_transfer_files.$'):
        submitfile.job_ads(write(directory, not_transferred), 1)  # condor_submit's own words, not the bindings'


def test_a_missing_input_stream_is_refused(directory):
    with pytest.raises(SubmitFileError, match=r"Can't open \".*/none.in\""):
        submitfile.job_ads(write(directory, f"executable = {directory}/analyze\ninput = none.in\nqueue\n"), 1)


def test_a_bad_initialdir_is_refused_with_the_submit_languages_message(directory):
    text = f"executable = {directory}/analyze\ninitialdir = {directory}/nowhere\nqueue\n"
    with pytest.raises(SubmitFileError, match=f"^ERROR: No such directory: {directory}/nowhere$"):
        submitfile.job_ads(write(directory, text), 1)
    with pytest.raises(Exception, match="No such directory"):  # what HTCondor's own translation says
        oracle(text, 1)


def test_an_unreadable_submit_file_is_refused(tmp_path):
    with pytest.raises(SubmitFileError, match="Failed to open command file"):
        submitfile.clusters(tmp_path / "absent.sub")


def test_an_environment_xml_cannot_carry_is_refused_naming_the_attribute(directory):
    text = f"executable = {directory}/analyze\nenvironment = \"BELL=a\x07b\"\nqueue\n"
    ads = submitfile.job_ads(write(directory, text), 1)
    assert ads[0]["Environment"] == "BELL=a\x07b"  # condor_submit takes it
    with pytest.raises(ValueError, match="Environment holds the character U[+]0007"):
        to_struct(ads[0])


def test_spooled_output_in_a_subdirectory_comes_back_there(directory):
    text = ("executable = analyze\ninput = data.in\ntransfer_input_files = a.dat\n"
            "output = out/job.$(Process).out\nerror = /tmp/abs.err\nqueue\n")
    (ad,) = submitfile.job_ads(write(directory, text), 5)
    job, files = spooled(ad)
    assert files == {"analyze": directory / "analyze", "data.in": directory / "data.in", "a.dat": directory / "a.dat"}
    assert (job["Cmd"], job["In"], job["Out"], job["SUBMIT_Out"]) == ("analyze", "data.in", "job.0.out",
                                                                      "out/job.0.out")
    assert "Iwd" not in job and job["SUBMIT_Iwd"] == str(directory)
    assert {name: str(path) for name, path in places(job).items()} == {"job.0.out": "out/job.0.out"}
