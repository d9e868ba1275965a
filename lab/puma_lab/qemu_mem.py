# SPDX-License-Identifier: Apache-2.0
"""Memory of a lab guest's QEMU process, as the host sees it."""

from puma_lab import errors


def ram_resident(guest):
    """Bytes of guest RAM resident in GUEST's QEMU (its largest mapping)."""
    best = (0, 0)
    size = None
    with open('/proc/%d/smaps' % guest.proc.pid) as f:
        for line in f:
            if line.startswith('Size:'):
                size = int(line.split()[1])
            elif line.startswith('Rss:') and size is not None:
                best = max(best, (size, int(line.split()[1])))
                size = None
    if best[0] < guest.mem_mb * 1024:
        raise errors.LabError('guest %s: no %d MiB RAM mapping in QEMU'
                              % (guest.name, guest.mem_mb))
    return best[1] * 1024


def rss(pid):
    """Resident bytes of process PID (VmRSS)."""
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    raise errors.LabError('no VmRSS for pid %d' % pid)
