"""A job's input zip (a message's body) unpacked safely, and its results packed as carod sent them.

carod extracted the body into the sandbox as it came: absolute names, ``..``, links, setuid bits and sizes
unchecked.  Here a body is read in memory and refused whole unless every entry is a plain file name (the job's input
files are flat, as in its TransferInput), a regular file, not encrypted, and the sizes stay within the limit; the
limit is checked on the bytes read, not on what the zip's directory claims."""

from __future__ import annotations

import io
import stat
import zipfile

from gateway.core.transactions import InputFile
from jobmodel.files import transfer_name_problem
from jobmodel.values import excerpt

from .codec import BadMessage

#: entries one input zip may have
MAX_ENTRIES = 1000


def input_files(body: bytes, max_bytes: int) -> list[InputFile]:
    """The files of an input zip (an empty body has none); raises :class:`BadMessage` for anything unsafe."""
    if not body:
        return []
    if len(body) > max_bytes:
        raise BadMessage(f"the input zip is {len(body)} bytes, over carod_max_input_bytes ({max_bytes})")
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise BadMessage(f"the body is not a zip archive ({exc})") from None
    if len(entries) > MAX_ENTRIES:
        raise BadMessage(f"the input zip has {len(entries)} entries, more than {MAX_ENTRIES}")
    files: list[InputFile] = []
    seen: set[str] = set()
    total = 0
    for entry in entries:
        name = entry.filename
        _check_entry(entry)
        if name in seen:
            raise BadMessage(f"the input zip holds {excerpt(name)} twice")
        seen.add(name)
        try:
            with archive.open(entry) as stream:
                data = stream.read(max_bytes - total + 1)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError, OSError, EOFError) as exc:
            raise BadMessage(f"cannot read {excerpt(name)} from the input zip ({exc})") from None
        total += len(data)
        if total > max_bytes:
            raise BadMessage(f"the input zip unpacks to more than carod_max_input_bytes ({max_bytes})")
        files.append(InputFile(name, data))
    return files


def _check_entry(entry: zipfile.ZipInfo) -> None:
    name = entry.filename
    shown = excerpt(name)
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise BadMessage(f"the input zip names an absolute path {shown}")
    if ".." in name.replace("\\", "/").split("/"):
        raise BadMessage(f"the input zip names {shown}, which leaves the job's directory")
    if entry.is_dir() or "/" in name:
        raise BadMessage(f"the input zip holds {shown} in a directory: input files are plain names in the job's "
                         f"directory")
    problem = transfer_name_problem(name)
    if problem is not None:
        raise BadMessage(f"the input zip names {shown}: {problem}")
    mode = entry.external_attr >> 16
    if entry.create_system == 3 and mode and stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise BadMessage(f"the input zip's {shown} is {kind}")
    if entry.flag_bits & 0x1:
        raise BadMessage(f"the input zip's {shown} is encrypted")


def results_zip(files: list[InputFile]) -> bytes:
    """The result archive carod sent in the final reply's body."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in files:
            archive.writestr(zipfile.ZipInfo(item.name, date_time=(1980, 1, 1, 0, 0, 0)), item.data)
    return buffer.getvalue()
