"""``q -better-analyze`` from ads alone: the conditions of a Requirements expression, each against the slots."""

from __future__ import annotations

from birdbath_client.ads import Expr
from birdbath_client.analysis import analyze, conditions

SLOT = {"OpSys": "LINUX", "Arch": "X86_64", "Memory": 4096, "Cpus": 2, "TotalSlotCpus": 2}


def test_conditions_are_the_top_level_ands_only():
    assert conditions('(TARGET.OpSys == "a && b") && ((X || Y) && Z) && (W)') == [
        'TARGET.OpSys == "a && b"', "(X || Y) && Z", "W"]
    assert conditions("(A) || (B)") == ["(A) || (B)"]


def test_a_job_that_fits_is_able_to_run_and_one_asking_too_many_cpus_is_not():
    job = {"ClusterId": 4, "ProcId": 1, "JobStatus": 1, "RequestCpus": 2,
           "Requirements": Expr('(TARGET.OpSys == "LINUX") && (TARGET.Memory >= 1024)')}
    assert "      1 are able to run your job" in list(analyze(job, [SLOT]))
    lines = list(analyze(job | {"RequestCpus": 8}, [SLOT]))
    assert "[2]           0  TARGET.Cpus >= RequestCpus (8)" in lines and "      0 are able to run your job" in lines
