"""The process's memory limits read from fake file trees (``root=``): cgroup v2 and v1, the
hybrid layout, containers that see their own cgroup as the mount's root, and files that are
missing or garbage (never an error: no limit found is no limit)."""
from __future__ import annotations

import pytest

from graphc.executor.budget import host_memory, physical_memory
from graphc.executor.memory_limits import cgroup_memory_limit, process_memory_limit, status_kib

GiB = 1 << 30
V1_UNLIMITED = "9223372036854771712\n"


def fake_tree(tmp_path, files: dict):
    for path, text in files.items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return str(tmp_path)


def mountinfo(*mounts):
    """Lines of /proc/self/mountinfo for ``(fstype, mounted root, mount point, options)``."""
    lines = ["22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw"]
    for i, (fstype, root, point, options) in enumerate(mounts):
        lines.append(f"{30 + i} 25 0:{26 + i} {root} {point} rw,nosuid shared:{9 + i} - {fstype} cgroup {options}")
    return "\n".join(lines) + "\n"


V2_MOUNT = ("cgroup2", "/", "/sys/fs/cgroup", "rw,nsdelegate")


def test_v2_takes_the_least_limit_of_the_cgroup_and_its_parents(tmp_path):
    root = fake_tree(tmp_path, {
        "/proc/self/cgroup": "0::/user.slice/app.scope\n",
        "/proc/self/mountinfo": mountinfo(V2_MOUNT),
        "/sys/fs/cgroup/user.slice/memory.max": f"{GiB}\n",
        "/sys/fs/cgroup/user.slice/app.scope/memory.max": "max\n"})
    assert cgroup_memory_limit(root) == GiB
    (tmp_path / "sys/fs/cgroup/user.slice/app.scope/memory.max").write_text(f"{GiB // 4}\n")
    assert cgroup_memory_limit(root) == GiB // 4


def test_v2_in_a_container_reads_the_mount_root(tmp_path):
    root = fake_tree(tmp_path, {
        "/proc/self/cgroup": "0::/\n",
        "/proc/self/mountinfo": mountinfo(V2_MOUNT),
        "/sys/fs/cgroup/memory.max": "536870912\n"})
    assert cgroup_memory_limit(root) == 536870912


def test_v1_container_whose_mount_root_is_its_own_cgroup(tmp_path):
    root = fake_tree(tmp_path, {
        "/proc/self/cgroup": "12:pids:/docker/abc\n4:cpu,memory:/docker/abc\n1:name=systemd:/docker/abc\n",
        "/proc/self/mountinfo": mountinfo(("cgroup", "/docker/abc", "/sys/fs/cgroup/memory", "rw,cpu,memory")),
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": f"{2 * GiB}\n"})
    assert cgroup_memory_limit(root) == 2 * GiB


def test_hybrid_layout_without_limits_has_none(tmp_path):
    """cgroup v1 controllers plus v2 at /sys/fs/cgroup/unified without the memory controller,
    the v1 files saying "no limit" (LONG_MAX rounded to a page): the layout of this machine."""
    root = fake_tree(tmp_path, {
        "/proc/self/cgroup": "4:memory:/process_api/cc4f\n0::/\n",
        "/proc/self/mountinfo": mountinfo(("cgroup", "/", "/sys/fs/cgroup/memory", "rw,memory"),
                                          ("cgroup2", "/", "/sys/fs/cgroup/unified", "rw")),
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/memory/process_api/cc4f/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/unified/cgroup.procs": "1\n"})
    assert cgroup_memory_limit(root) is None
    (tmp_path / "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes").write_text(f"{3 * GiB}\n")
    assert cgroup_memory_limit(root) == 3 * GiB


def test_without_mountinfo_the_usual_mount_points_are_read(tmp_path):
    root = fake_tree(tmp_path, {"/proc/self/cgroup": "0::/svc\n", "/sys/fs/cgroup/svc/memory.max": f"{GiB}\n"})
    assert cgroup_memory_limit(root) == GiB


def test_mount_points_with_escaped_spaces(tmp_path):
    root = fake_tree(tmp_path, {
        "/proc/self/cgroup": "0::/a b\n",
        "/proc/self/mountinfo": mountinfo(("cgroup2", "/", "/sys/fs/my\\040cgroup", "rw")),
        "/sys/fs/my cgroup/a b/memory.max": f"{GiB}\n"})
    assert cgroup_memory_limit(root) == GiB


@pytest.mark.parametrize("files", [
    {},  # no /proc at all (not Linux)
    {"/proc/self/cgroup": ""},
    {"/proc/self/cgroup": "garbage\n::\n0::\n", "/proc/self/mountinfo": "x - \n- cgroup2\n1 2 3\n"},
    {"/proc/self/cgroup": "0::/x\n", "/proc/self/mountinfo": mountinfo(V2_MOUNT),
     "/sys/fs/cgroup/x/memory.max": "-5\n"},
    {"/proc/self/cgroup": "0::/../../etc\n", "/proc/self/mountinfo": mountinfo(("cgroup2", "/other", "/sys/fs/cgroup", "")),
     "/sys/fs/cgroup/memory.max": "max\n"},
], ids=["no-proc", "empty", "garbage", "negative", "outside-the-mount"])
def test_missing_or_garbled_files_mean_no_limit(tmp_path, files):
    root = fake_tree(tmp_path, files)
    assert cgroup_memory_limit(root) is None


def test_host_memory_is_the_least_of_the_machine_and_the_limits(tmp_path):
    limited = fake_tree(tmp_path, {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": mountinfo(V2_MOUNT),
                                   "/sys/fs/cgroup/memory.max": f"{GiB // 8}\n"})
    assert process_memory_limit(limited) == GiB // 8  # the test process has no RLIMIT_AS/RLIMIT_DATA
    assert host_memory(limited) == min(GiB // 8, physical_memory())
    (tmp_path / "sys/fs/cgroup/memory.max").write_text(f"{1 << 60}\n")  # more than the machine has
    assert host_memory(limited) == physical_memory()


def test_status_fields_are_read_in_kib():
    status = "Name:\tpython\nVmPeak:\t  999 kB\nVmSize:\t  123456 kB\nVmData:\t 2048 kB\nVmBad:\tnope\n"
    assert (status_kib(status, "VmSize"), status_kib(status, "VmData")) == (123456, 2048)
    assert status_kib(status, "VmBad") is None and status_kib(status, "VmSwap") is None
