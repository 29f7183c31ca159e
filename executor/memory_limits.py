"""How much memory this process may use on the host, beyond the machine's physical RAM: its
cgroup's memory limit (a container's, a systemd slice's) and its own resource limits.

Every reader takes ``root`` (the file system's root, ``"/"`` but for tests on fake trees) and
says None where the limit is absent, unlimited or unreadable: a missing limit never refuses a plan.
"""
from __future__ import annotations

import os

UNLIMITED_V1 = 1 << 62  # cgroup v1 writes "no limit" as LONG_MAX rounded down to a page
DEFAULT_MOUNTS = (("cgroup2", "/", "/sys/fs/cgroup"), ("cgroup", "/", "/sys/fs/cgroup/memory"))
LIMIT_FILES = {"cgroup2": "memory.max", "cgroup": "memory.limit_in_bytes"}


def process_memory_limit(root: str = "/") -> int | None:
    """The least of the cgroup limit and the room left under RLIMIT_AS and RLIMIT_DATA, or None.

    >>> limit = process_memory_limit()
    >>> limit is None or limit > 0
    True
    """
    found = [n for n in (cgroup_memory_limit(root), *rlimit_rooms(root)) if n is not None]
    return min(found, default=None)


# ---- cgroups ---------------------------------------------------------------------------------------
def cgroup_memory_limit(root: str = "/") -> int | None:
    """The least ``memory.max`` (cgroup v2) or ``memory.limit_in_bytes`` (v1) of this process's
    cgroup and of every cgroup above it: a parent's limit bounds its children too."""
    membership = _read(root, "/proc/self/cgroup")
    if membership is None:
        return None
    limits = []
    for fstype, directory, top in _cgroup_directories(root, membership):
        while True:
            value = _parse_limit(_read(root, os.path.join(directory, LIMIT_FILES[fstype])))
            if value is not None:
                limits.append(value)
            if directory == top or directory == os.path.dirname(directory):
                break
            directory = os.path.dirname(directory)
    return min(limits, default=None)


def _cgroup_directories(root: str, membership: str):
    """``(fstype, this process's cgroup folder, the hierarchy's mount point)`` for the v2
    hierarchy and the v1 memory one, from /proc/self/cgroup and where /proc/self/mountinfo says
    each hierarchy is mounted (and which of its folders is mounted there: a container sees its
    own cgroup as the mount's root)."""
    paths = {}
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            paths["cgroup2"] = parts[2]
        elif len(parts) == 3 and "memory" in parts[1].split(","):
            paths["cgroup"] = parts[2]
    for fstype, mounted_root, mount_point in _cgroup_mounts(root):
        path = paths.get(fstype)
        if path is None:
            continue
        inside = os.path.relpath(path, mounted_root) if _is_within(path, mounted_root) else "."
        yield fstype, os.path.normpath(os.path.join(mount_point, inside)), os.path.normpath(mount_point)


def _cgroup_mounts(root: str):
    mountinfo = _read(root, "/proc/self/mountinfo")
    if mountinfo is None:
        yield from DEFAULT_MOUNTS
        return
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 5:
            continue
        tail = fields[fields.index("-") + 1:]
        if not tail:
            continue
        options = tail[2].split(",") if len(tail) > 2 else []
        if tail[0] == "cgroup2" or (tail[0] == "cgroup" and "memory" in options):
            yield tail[0], _unescape(fields[3]), _unescape(fields[4])


def _is_within(path: str, folder: str) -> bool:
    return folder == "/" or path == folder or path.startswith(folder.rstrip("/") + "/")


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for escaped, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, char)
    return field


def _parse_limit(text: str | None) -> int | None:
    text = (text or "").strip()
    if not text.isdigit():  # "max" (v2's no limit), empty or unreadable
        return None
    value = int(text)
    return None if value >= UNLIMITED_V1 else value


# ---- resource limits -----------------------------------------------------------------------------
def rlimit_rooms(root: str = "/") -> list:
    """The room left under RLIMIT_AS and RLIMIT_DATA: each soft limit minus what the process
    has mapped now (VmSize, VmData), as an allocation must fit in what is left. None where
    there is no limit, or no ``resource`` module (Windows)."""
    try:
        import resource
    except ImportError:
        return []
    status = _read(root, "/proc/self/status") or ""
    rooms = []
    for limit_name, field in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        limit = resource.getrlimit(getattr(resource, limit_name))[0]
        if limit == resource.RLIM_INFINITY:
            rooms.append(None)
            continue
        rooms.append(max(0, limit - (status_kib(status, field) or 0) * 1024))
    return rooms


def status_kib(status: str, field: str) -> int | None:
    """A ``Field:   1234 kB`` line of /proc/self/status, in KiB.

    >>> status_kib("Name:\\tpython\\nVmSize:\\t  123456 kB\\n", "VmSize")
    123456
    """
    for line in status.splitlines():
        name, _, rest = line.partition(":")
        if name == field and rest.split() and rest.split()[0].isdigit():
            return int(rest.split()[0])
    return None


def _read(root: str, path: str) -> str | None:
    try:
        with open(os.path.join(root, path.lstrip("/")), encoding="utf-8", errors="replace") as f:
            return f.read(1 << 20)  # these files are small; a bound all the same
    except OSError:
        return None
