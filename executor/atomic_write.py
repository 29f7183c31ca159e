"""Atomic file writes (plan files): a temporary file in the same folder, fsync, ``os.replace``,
then an fsync of the folder. A process killed mid-save leaves the previous file intact.

- Every failure is a GraphcError naming the user's path (never the temporary file's), and the
  temporary file is removed on every failure, KeyboardInterrupt included.
- Temporary files are named ``.<name>.graphc-tmp-<host>-<pid>-<random>``. A process killed
  mid-save cannot remove its own, so each save first removes the ones a dead save of the same
  target left: those of this host whose process is gone, and any untouched for an hour (a
  live save writes and renames within seconds; the hour also covers other hosts sharing the
  folder and reused pids).
- Once ``os.replace`` has run, the new file is complete and in place. If syncing the folder
  then fails, the rename might not survive a power failure, but the save did happen: it is
  reported as a RuntimeWarning, not as a failed save (docs/design-notes.md).
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import socket
import time
import warnings

from ..ir.errors import GraphcError

TEMP_MARK = ".graphc-tmp-"
STALE_SECONDS = 3600
_HOST = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
_TEMP_TAIL = re.compile(r"(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]{1,10})-[0-9a-f]{8}")
# a folder that cannot be synced on this platform or filesystem: nothing to warn about
_SYNC_UNSUPPORTED = {errno.EINVAL, errno.EBADF, getattr(errno, "ENOTSUP", errno.EINVAL),
                     getattr(errno, "EOPNOTSUPP", errno.EINVAL)}


def write_atomically(path: str, data, what: str = "file") -> None:
    """Replace ``path`` by ``data`` atomically; GraphcError ``cannot save {what} to {path}: ...``.
    ``data``: bytes, or an iterable of buffers written one after the other (a plan file: its
    header, then its arrays' own memory, so nothing is joined into one big copy first)."""
    folder = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(folder, os.path.basename(path))
    mode = _file_mode(path)
    tmp = os.path.join(folder, _temp_name(os.path.basename(path)))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    except OSError as e:
        raise _save_error(what, path, e) from e
    try:
        try:
            os.chmod(tmp, mode)
            for chunk in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
                _write_all(fd, chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        _remove(tmp)
        if isinstance(e, OSError):
            raise _save_error(what, path, e) from e
        raise
    _sync_folder(folder, path, what)


def _save_error(what: str, path: str, e: OSError) -> GraphcError:
    reason = e.strerror or str(e) or type(e).__name__
    return GraphcError(f"cannot save {what} to {path}: {reason}; the file at that path, if any, is unchanged")


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (signals, pipes, some filesystems): loop until done."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view[:1 << 30])
        if written <= 0:
            raise OSError(errno.EIO, "the disk accepted no more bytes")
        view = view[written:]


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass  # already gone, or the folder is unusable: the original error says more


def _sync_folder(folder: str, path: str, what: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows, where a folder cannot be opened (nor synced)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _SYNC_UNSUPPORTED:
            warnings.warn(f"{what} saved to {path}, complete and in place, but its folder could not be synced "
                          f"({e.strerror or e}): the new file may not survive a power failure",
                          RuntimeWarning, stacklevel=4)
    finally:
        with contextlib.suppress(OSError):  # closing the folder's read-only descriptor loses nothing
            os.close(fd)


def _file_mode(path: str) -> int:
    """Keep an existing file's permissions; new files get the usual 0o666 minus the umask."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


# ---- temporary files ---------------------------------------------------------------------
def _stem(name: str) -> str:
    """The target's name as it appears in its temporary files (a hash if it is too long for one)."""
    if len(os.fsencode(name)) <= 120:
        return name
    return hashlib.sha256(os.fsencode(name)).hexdigest()[:32]


def _temp_name(name: str) -> str:
    return f".{_stem(name)}{TEMP_MARK}{_HOST}-{os.getpid()}-{secrets.token_hex(4)}"


def remove_stale_temps(folder: str, name: str) -> list:
    """Remove the temporary files dead saves of ``name`` left in ``folder``; returns their paths."""
    prefix = f".{_stem(name)}{TEMP_MARK}"
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed  # the save itself will report an unusable folder
    for entry in entries:
        match = _TEMP_TAIL.fullmatch(entry.name[len(prefix):]) if entry.name.startswith(prefix) else None
        if match and _is_stale(entry, match):
            try:
                os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                pass  # another save removed it first, or it is not ours to remove
    return removed


def _is_stale(entry: os.DirEntry, match: re.Match) -> bool:
    try:
        if not entry.is_file(follow_symlinks=False):
            return False
        age = time.time() - entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return False
    if age > STALE_SECONDS:
        return True
    pid = int(match["pid"])
    return match["host"] == _HOST and pid not in (0, os.getpid()) and not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists here. When unsure, alive: its file then waits for the hour."""
    if os.name != "posix":
        return True  # os.kill(pid, 0) would terminate the process on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's live process
        return True
    return True
