"""The machine ad of this host: what job ``Requirements`` are matched against, as a startd would advertise it."""

from __future__ import annotations

import os
import platform
import shutil
import socket
from pathlib import Path

import classad2

_ARCH = {"x86_64": "X86_64", "amd64": "X86_64", "aarch64": "aarch64", "arm64": "aarch64", "ppc64le": "ppc64le"}


def memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        return 0


def os_release() -> tuple[str, str]:
    """(name, major version) from /etc/os-release, e.g. ("Debian", "12")."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            key, _, value = line.partition("=")
            fields[key] = value.strip('"')
    except OSError:
        pass
    return fields.get("NAME", "Linux").split()[0], fields.get("VERSION_ID", "0").split(".")[0]


def machine_ad(cpus: int, work_dir: Path, version: str, uid_domain: str | None = None) -> classad2.ClassAd:
    host = socket.getfqdn()
    distro, major = os_release()
    ad = classad2.ClassAd()
    values: dict[str, object] = {
        "MyType": "Machine", "TargetType": "Job", "Name": f"slot1@{host}", "Machine": host,
        "Arch": _ARCH.get(platform.machine().lower(), platform.machine()), "OpSys": platform.system().upper(),
        "OpSysName": distro, "OpSysMajorVer": int(major) if major.isdigit() else 0,
        "OpSysAndVer": f"{distro}{major}", "Cpus": cpus, "TotalCpus": os.cpu_count() or 1,
        "Memory": memory_mb(), "Disk": shutil.disk_usage(work_dir).free // 1024,
        "HasFileTransfer": True, "FileSystemDomain": host, "UidDomain": uid_domain or host, "CondorVersion": version,
        "StartdIpAddr": "<127.0.0.1:0>",
    }
    for name, value in values.items():
        ad[name] = value
    ad["Requirements"] = classad2.ExprTree("true")
    ad["Start"] = classad2.ExprTree("true")
    return ad
