"""The HTCondor tools a running job may call, installed at start-up in the state directory's ``libexec/``.

Scripts written for HTCondor find chirp as `` `condor_config_val LIBEXEC`/condor_chirp `` (the rendezvous recipe of
the parallel universe does): a starter puts HTCondor's ``BIN`` first on a parallel job's ``PATH``, and here the
directory these tools are in comes first on the ``PATH`` of every parallel or chirp job (``chirpconfig.py``).

- ``condor_chirp`` is the ``htchirp`` package's own ``condor_chirp`` (same commands, same output), which reads
  ``$_CONDOR_CHIRP_CONFIG`` and talks to the run's chirp server (``chirp.py``);
- ``condor_config_val`` answers ``LIBEXEC`` and ``BIN`` (this directory) and ``-version``; any other name is "Not
  defined", as for a knob nobody set.

They run with the gateway's own interpreter (``-Es``: the job's ``PYTHON*`` variables and user site do not
change what they import), so a job that runs as another user needs that interpreter to be readable by it (a
system-wide install is; one under root's home is not).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: condor_config_val's answer to a name nobody defined (HTCondor's words), and its exit status then
NOT_DEFINED = "Not defined: {name}"

_CHIRP = """#!{python} -Es
# condor_chirp for jobs of the gateway's local backend: the htchirp package's condor_chirp (written at start-up)
import sys
from htchirp import condor_chirp
sys.exit(condor_chirp(sys.argv[1:], True))
"""

_CONFIG_VAL = """#!{python} -Es
# condor_config_val for jobs of the gateway's local backend (written at start-up)
import sys
sys.path.insert(0, {root!r})
from backends.local.jobtools import config_val_main
sys.exit(config_val_main(sys.argv[1:], {values}, {version!r}))
"""


def libexec(execute_root: Path) -> Path:
    """Where the tools are: in the execute directory, beside the jobs' own (wherever ``execute`` puts them)."""
    return execute_root / "libexec"


def install(directory: Path, version: str, platform: str) -> None:
    """Write the tools into ``directory`` (readable and executable by every job's owner)."""
    directory.mkdir(exist_ok=True)
    directory.chmod(0o755)
    python = sys.executable
    root = str(Path(__file__).resolve().parents[2])
    values = json.dumps({"LIBEXEC": str(directory), "BIN": str(directory)})
    for name, text in (("condor_chirp", _CHIRP.format(python=python)),
                       ("condor_config_val", _CONFIG_VAL.format(python=python, root=root, values=values,
                                                                version=f"{version}\n{platform}\n"))):
        temporary = directory / f".{name}.tmp"
        temporary.write_text(text)
        temporary.chmod(0o755)
        os.replace(temporary, directory / name)


def config_val_main(arguments: list[str], values: dict[str, str], version: str) -> int:
    """``condor_config_val [-version] NAME...``: each name's value on a line (names ignore case, as knobs do)."""
    if not arguments:
        sys.stderr.write("Usage: condor_config_val [-version] NAME...\n")
        return 1
    known = {name.upper(): value for name, value in values.items()}
    status = 0
    for argument in arguments:
        if argument.lower() in ("-version", "--version", "-v"):
            sys.stdout.write(version)
        elif argument.startswith("-"):
            continue  # (-config, -verbose, ...: nothing else to say about these knobs)
        elif argument.upper() in known:
            sys.stdout.write(known[argument.upper()] + "\n")
        else:
            sys.stderr.write(NOT_DEFINED.format(name=argument) + "\n")
            status = 1
    return status
