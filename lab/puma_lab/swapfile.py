# SPDX-License-Identifier: Apache-2.0
"""A swap file for the length of a benchmark, as an operator might add.

Memory cgroups push pages beyond their limit to swap when the machine
has some; this machine has none by default.  ``SwapFile`` adds one of
the given size (on the lab's file system), and takes it away again.
"""

import os
import subprocess

from puma_lab import errors

MIB = 1024 * 1024


def active():
    """Bytes of swap the machine has now."""
    with open('/proc/meminfo') as f:
        for line in f:
            if line.startswith('SwapTotal:'):
                return int(line.split()[1]) * 1024
    return 0


class SwapFile:
    def __init__(self, path, mib):
        self.path = path
        self.mib = mib
        self.on = False

    def __enter__(self):
        if self.mib <= 0:
            return self
        try:
            subprocess.run(['fallocate', '-l', '%dM' % self.mib, self.path],
                           check=True, capture_output=True)
            os.chmod(self.path, 0o600)
            subprocess.run(['mkswap', self.path], check=True,
                           capture_output=True)
            subprocess.run(['swapon', self.path], check=True,
                           capture_output=True, text=True)
        except subprocess.CalledProcessError as e:
            self._remove()
            raise errors.LabError('cannot add a %d MiB swap file %s: %s'
                                  % (self.mib, self.path,
                                     (e.stderr or b'').strip())) from e
        self.on = True
        return self

    def _remove(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __exit__(self, *exc):
        if self.on:
            subprocess.run(['swapoff', self.path], check=True,
                           capture_output=True)
            self.on = False
        self._remove()
