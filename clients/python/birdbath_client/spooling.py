"""``submit -spool`` and ``fetch``: a job whose files travel with it, as condor_submit -spool and
condor_transfer_data do it.

The gateway's spool is flat (plain file names) and becomes the job's ``Iwd``.  So the executable, ``input`` and
``transfer_input_files`` are sent under their base names, and ``output``/``error`` are written there under theirs;
where the submit file put them (``output = out/job.$(Process).out``, relative to the submit directory) is kept in
``SUBMIT_Out``/``SUBMIT_Err``/``SUBMIT_Iwd`` as condor_submit -spool keeps it, and ``fetch`` puts them back there,
relative to the directory it downloads into.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from .ads import Expr
from .submitfile import MATCH_TIME, SubmitFileError

NULL_FILE = "/dev/null"
#: the standard streams a spooled job writes under their base names, and where condor_submit keeps their paths
STREAMS = {"Out": "SUBMIT_Out", "Err": "SUBMIT_Err"}


def spooled(ad: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Path]]:
    """The ad as the gateway's spool runs it, and the local files to send (by the names the job will see)."""
    iwd = Path(str(ad.get("Iwd", ".")))
    job = dict(ad)
    job.pop("Iwd", None)  # the spool becomes Iwd
    job["SUBMIT_Iwd"] = str(iwd)
    command = Path(str(ad["Cmd"]))
    if MATCH_TIME in str(command):
        raise SubmitFileError(f"ERROR: the executable {command} is chosen when the job is matched with a slot "
                              f"($$()), so it cannot be spooled: submit it without -spool")
    files = {command.name: iwd / command}
    job["Cmd"] = command.name
    names = [name.strip() for name in str(ad.get("TransferInput", "")).split(",") if name.strip()]
    stdin = str(ad.get("In", NULL_FILE))
    if stdin != NULL_FILE:
        files[Path(stdin).name] = iwd / stdin
        job["In"] = Path(stdin).name
    files.update({Path(name.rstrip("/")).name: iwd / name for name in names})
    for stream, original in STREAMS.items():
        target = str(ad.get(stream, NULL_FILE))
        if target != NULL_FILE:
            job[original] = target
            job[stream] = Path(target).name
    job["TransferInput"] = ",".join(files)
    job["ShouldTransferFiles"] = "YES"
    job["LeaveJobInQueue"] = Expr("FilesRetrieved =?= false")  # stay until the output is fetched
    job["FilesRetrieved"] = False
    return job, files


def places(ad: Mapping[str, Any]) -> dict[str, Path]:
    """Where ``fetch`` puts a spooled job's files that the submit file named with a directory: the spool name of
    its output and error, and their path relative to the download directory (absolute paths come home under their
    base name, as nothing outside the download directory is written)."""
    found = {}
    for stream, original in STREAMS.items():
        if original in ad and stream in ad:
            path = Path(str(ad[original]))
            if not path.is_absolute() and ".." not in path.parts and path != Path(path.name):
                found[str(ad[stream])] = path
    return found
