# SPDX-License-Identifier: Apache-2.0
"""A lab: one switch namespace with a bridge, guests and emulated hosts.

Everything a lab makes is named after its number (namespaces ``puma-N``,
``puma-N-HOST``; taps ``ptN...``) and lives under its run directory
(``/run/puma-lab/N``), so
:meth:`Lab.teardown` and :func:`cleanup_all` remove exactly that, also
after a test failed half-way.
"""

import contextlib
import os
import shutil
import signal
import time

from puma_lab import errors
from puma_lab import netns
from puma_lab import paths

SUBNET = '10.77.0.%d'
OWNER = 'owner'
NETNS_DIR = '/run/netns'


def _claim_num():
    """The lowest lab number in use by nobody, claimed for this lab.

    A number is taken while its namespace or its run directory exists.
    Creating the run directory claims it atomically, so two labs starting
    at once never share a number, and a lab never deletes the directory
    of another one that is still tearing down.  The directory names the
    process that claimed it (``owner``), so that :func:`leftovers` of one
    test run can tell another run's live labs from its own remains.
    """
    os.makedirs(paths.RUN, exist_ok=True)
    used = {_num_of_ns(ns) for ns in netns.names()}
    n = 1
    while True:
        if n not in used:
            try:
                os.mkdir(os.path.join(paths.RUN, str(n)))
            except FileExistsError:
                n += 1
                continue
            with open(os.path.join(paths.RUN, str(n), OWNER), 'w') as f:
                f.write('%d\n' % os.getpid())
            return n
        n += 1


class Lab:
    """Context manager: ``with Lab('name') as lab: ...``."""

    def __init__(self, name='lab', keep_logs=None):
        self.name = name
        self.num = _claim_num()
        self.ns = '%s%d' % (netns.PREFIX, self.num)
        # Short: unix socket paths below it must stay under 108 bytes.
        self.dir = os.path.join(paths.RUN, str(self.num))
        self.logs = keep_logs
        self._index = 0
        self.guests = []
        self.hosts = []

    def __enter__(self):
        return self.setup()

    def __exit__(self, *exc):
        self.teardown()

    def setup(self):
        try:
            netns.add(self.ns)
            netns.add_bridge(self.ns)
        except errors.LabError:
            self.teardown()
            raise
        return self

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def next_index(self):
        self._index += 1
        return self._index

    @staticmethod
    def guest_addr(index, nic):
        if nic:
            raise errors.LabError('one lab NIC per guest is supported')
        return (SUBNET % (100 + index)) + '/24'

    def guest_mac(self, index, nic):
        return '52:54:00:%02x:%02x:%02x' % (self.num, index, nic)

    def host_addr(self, index):
        return SUBNET % (10 + index)

    def register(self, thing, kind):
        (self.hosts if kind == 'host' else self.guests).append(thing)

    def teardown(self):
        """Stop guests and hosts, delete namespaces, keep or drop logs."""
        problems = []
        for g in reversed(self.guests):
            try:
                g.stop()
            except Exception as e:  # noqa: B902 - teardown goes on
                problems.append('guest %s: %s' % (g.name, e))
        for h in reversed(self.hosts):
            try:
                h.stop()
            except Exception as e:  # noqa: B902 - teardown goes on
                problems.append('host %s: %s' % (h.name, e))
        for ns in netns.names():
            if ns == self.ns or ns.startswith(self.ns + '-'):
                netns.delete(ns)
        if self.logs:
            _save_logs(self.dir, os.path.join(self.logs, self.name))
        shutil.rmtree(self.dir, ignore_errors=True)
        if problems:
            raise errors.LabError('teardown: ' + '; '.join(problems))


def _save_logs(src, dest):
    """Copy console and daemon logs (not sockets or disks) to DEST."""
    for root, _dirs, files in os.walk(src):
        for f in files:
            if f.endswith('.log'):
                rel = os.path.relpath(os.path.join(root, f), src)
                os.makedirs(os.path.dirname(os.path.join(dest, rel)),
                            exist_ok=True)
                shutil.copy(os.path.join(root, f), os.path.join(dest, rel))


# Servers the tests start outside any namespace, with their data in the
# run directory (nova_driver's tests: puma_nova/tests/mariadb.py and
# rabbitmq.py).
_RUN_SERVERS = ('mariadbd', 'beam.smp')


def _processes():
    """(pid, executable's name, argv as bytes) of the running processes."""
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                cmd = f.read().split(b'\0')
        except OSError:
            continue
        yield pid, os.path.basename(cmd[0].decode(errors='replace')), cmd


def _run_servers():
    """PIDs of the tests' servers whose data is in the run directory."""
    mark = (paths.RUN.rstrip('/') + '/').encode()
    return [int(pid) for pid, exe, cmd in _processes()
            if exe in _RUN_SERVERS and mark in b' '.join(cmd)]


def cleanup_all():
    """Remove every lab namespace (ending its processes) and run dir.

    The tests' servers with their data there (a killed test process
    leaves its MariaDB or RabbitMQ running) are ended first, by PID.
    """
    for ns in netns.names():
        netns.delete(ns)
    pids = _run_servers()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(paths.RUN, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _num_of_ns(ns):
    part = ns[len(netns.PREFIX):].split('-')[0]
    return int(part) if part.isdigit() else None


def others_labs():
    """Numbers of the labs that another live process claimed.

    lab/test runs the kmod and lab envs at once: one env's labs are not
    remains of the other.
    """
    nums = set()
    if not os.path.isdir(paths.RUN):
        return nums
    for entry in os.listdir(paths.RUN):
        try:
            with open(os.path.join(paths.RUN, entry, OWNER)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if entry.isdigit() and pid != os.getpid() and _alive(pid):
            nums.add(int(entry))
    return nums


def _ns_inodes(nums):
    """Inodes of the network namespaces of the labs NUMS."""
    inodes = set()
    for ns in netns.names():
        if _num_of_ns(ns) in nums:
            try:
                inodes.add(os.stat(os.path.join(NETNS_DIR, ns)).st_ino)
            except OSError:
                pass
    return inodes


def _belongs_to(pid, cmd, nums, inodes):
    """Whether process PID (argv CMD) runs in or for one of the labs NUMS."""
    try:
        if os.stat('/proc/%s/ns/net' % pid).st_ino in inodes:
            return True
    except OSError:
        pass
    joined = b' '.join(cmd)
    return any(('%s/%d/' % (paths.RUN, n)).encode() in joined for n in nums)


def leftovers():
    """What labs left behind: namespaces, run files, QEMU/libvirtd.

    The labs another live process (another test env) still runs are not
    leftovers; everything else is, this process's own labs included.
    """
    others = others_labs()
    found = ['netns %s' % ns for ns in netns.names()
             if _num_of_ns(ns) not in others]
    if os.path.isdir(paths.RUN):
        mine = sorted(e for e in os.listdir(paths.RUN)
                      if not (e.isdigit() and int(e) in others))
        if mine:
            found.append('files in %s: %s' % (paths.RUN, ', '.join(mine)))
    inodes = _ns_inodes(others)
    for pid, exe, cmd in _processes():
        if exe in ('qemu-system-x86_64', 'libvirtd') and \
                paths.CACHE.encode() in b' '.join(cmd) and \
                not _belongs_to(pid, cmd, others, inodes):
            found.append('process %s %s' % (pid, exe))
    return found
