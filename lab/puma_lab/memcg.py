# SPDX-License-Identifier: Apache-2.0
"""A memory cgroup that bounds one lab process, as an operator would.

Made below the lab process's own memory cgroup (cgroup v1's memory
controller or the unified v2 hierarchy, whichever the machine has), with
a hard limit on resident memory; pages beyond it go to swap if the
machine has any, else the kernel's OOM killer ends the process.  The
cgroup's peak usage and its OOM kills are read back for benchmarks.
"""

import os
import time

from puma_lab import errors

V1_ROOT = '/sys/fs/cgroup/memory'
V2_ROOT = '/sys/fs/cgroup'


def _own_path():
    """(root, path of this process's memory cgroup below root)."""
    with open('/proc/self/cgroup') as f:
        lines = f.read().splitlines()
    for line in lines:
        _, controllers, path = line.split(':', 2)
        if 'memory' in controllers.split(',') and os.path.isdir(V1_ROOT):
            return V1_ROOT, path.lstrip('/')
    for line in lines:
        if line.startswith('0::') and os.path.exists(
                os.path.join(V2_ROOT, 'cgroup.controllers')):
            return V2_ROOT, line[3:].lstrip('/')
    raise errors.LabError('no memory cgroup controller on this machine')


class MemoryCgroup:
    """A child memory cgroup NAME with a limit of LIMIT bytes."""

    def __init__(self, name, limit):
        self.root, parent = _own_path()
        self.v1 = self.root == V1_ROOT
        self.path = os.path.join(self.root, parent, name)
        self.limit = limit

    def _file(self, v1, v2):
        return os.path.join(self.path, v1 if self.v1 else v2)

    def _write(self, v1, v2, value):
        with open(self._file(v1, v2), 'w') as f:
            f.write(str(value))

    def _read(self, v1, v2):
        with open(self._file(v1, v2)) as f:
            return f.read()

    def create(self):
        os.makedirs(self.path, exist_ok=False)
        self._write('memory.limit_in_bytes', 'memory.max', self.limit)
        return self

    def add(self, pid):
        """Move PID (all its threads) into the cgroup."""
        self._write('cgroup.procs', 'cgroup.procs', pid)

    def peak(self):
        """Highest resident usage since creation, bytes."""
        return int(self._read('memory.max_usage_in_bytes', 'memory.peak'))

    def peak_with_swap(self):
        """Highest resident plus swapped usage since creation, bytes.

        The memory the process needed, whether the limit let it stay or
        not.
        """
        if self.v1:
            return int(self._read('memory.memsw.max_usage_in_bytes', ''))
        swap = os.path.join(self.path, 'memory.swap.peak')
        extra = 0
        if os.path.exists(swap):
            with open(swap) as f:
                extra = int(f.read())
        return self.peak() + extra

    def swap(self):
        """Bytes of the cgroup's memory in swap now."""
        if not self.v1:
            return int(self._read('', 'memory.swap.current'))
        for line in self._read('memory.stat', '').splitlines():
            key, _, val = line.partition(' ')
            if key == 'swap':
                return int(val)
        return 0

    def oom_kills(self):
        text = self._read('memory.oom_control', 'memory.events')
        for line in text.splitlines():
            key, _, val = line.partition(' ')
            if key == 'oom_kill':
                return int(val)
        return 0

    def remove(self, timeout=30):
        """Remove the cgroup once its processes are gone."""
        deadline = time.monotonic() + timeout
        while os.path.isdir(self.path):
            try:
                os.rmdir(self.path)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
