"""``$$()`` match-time substitution (HTCondor manual, "condor_submit", *$$(attribute)*), on job ads made by
HTCondor's own submit language (the ``htcondor`` wheel's ``Submit(...).jobs()``) and a slot's ad."""

from __future__ import annotations

import os

import classad2
import htcondor
import pytest

from jobmodel.matchtime import UnexpandedReference, expand

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")

SLOT = classad2.ClassAd({"OpSys": "LINUX", "Arch": "X86_64", "Memory": 2048, "HasDocker": False,
                         "Machine": "node7.example.org"})


def job_ad(description: str) -> classad2.ClassAd:
    """The job's ad as condor_submit makes it (its text, read back with classad2)."""
    (ad,) = htcondor.Submit(description).jobs(clusterid=12)
    return classad2.parseOne(ad.printOld())


def test_a_platform_specific_executable_as_the_manual_writes_it():
    ad = job_ad("executable = /opt/bin/povray.$$(OpSys).$$(Arch)\nqueue\n")
    expanded = expand(ad, SLOT)
    assert expanded["Cmd"] == "/opt/bin/povray.LINUX.X86_64"
    assert (expanded["MATCH_OpSys"], expanded["MATCH_Arch"]) == ("LINUX", "X86_64")
    assert ad["Cmd"] == "/opt/bin/povray.$$(OpSys).$$(Arch)"  # the job's own ad is left as it was


def test_defaults_expressions_numbers_and_booleans():
    ad = job_ad('arguments = "--mem $$([TARGET.Memory * 9 / 10]) --host $$(Machine) --gpu $$(CUDADeviceName:none) '
                '--docker $$(HasDocker)"\nexecutable = /bin/prog\nqueue\n')
    assert expand(ad, SLOT)["Arguments"] == "--mem 1843 --host node7.example.org --gpu none --docker false"


def test_an_ad_without_references_is_returned_as_it_is():
    ad = job_ad("executable = /bin/true\narguments = $(Cluster)\nqueue\n")
    assert expand(ad, SLOT) is ad


def test_a_reference_in_an_expression_is_no_string_to_fill():
    """(The ad's text names ``$$(``: its attributes are looked at one by one, and only strings are filled.)"""
    ad = job_ad("executable = /bin/true\nqueue\n")
    ad["Rank"] = classad2.ExprTree('size(strcat("$$(Memory)", Owner))')
    assert expand(ad, SLOT) is ad


@pytest.mark.parametrize("arguments, words", [
    ("$$(GPUs)", "Cannot expand $$(GPUs) in Arguments: the machine ad has no attribute GPUs"),
    ("$$([TARGET.NoSuch + 1])", "Cannot expand $$([TARGET.NoSuch + 1]) in Arguments: the expression is undefined"),
    ("$$([1 +])", "Cannot expand $$([1 +]) in Arguments: the expression does not parse"),
])
def test_what_the_slot_cannot_fill_is_an_error_naming_it(arguments, words):
    ad = job_ad(f'executable = /bin/prog\narguments = "{arguments}"\nqueue\n')
    with pytest.raises(UnexpandedReference) as error:
        expand(ad, SLOT)
    assert str(error.value).startswith(words)
