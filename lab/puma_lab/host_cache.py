# SPDX-License-Identifier: Apache-2.0
"""Data disks of L2 guests in a kernel host's page cache.

A kernel host gets a data disk of its own (``kernel_host_disk``), an
ext4 that ``mount_data`` mounts where its chroot, and so the L2 QEMUs,
see it (``DATA_DIR``).  L2 guests get data disks in image files there,
opened in one of ``MODES``: through the kernel host's page cache
(``writeback``, QEMU's default), around it (``none``, O_DIRECT), or
through it with QEMU's ``exclusive-cache`` (qemu-patches/, patch 68),
which drops from it what the guest has read.  ``cached_bytes`` reads how
much of an image the kernel host's page cache holds (``fincore``).
"""

import os
import shlex

from puma_lab import errors
from puma_lab import vm

# Where the kernel host's data disk is mounted, as its chroot sees it.
DATA_DIR = '/run/puma-data'
HOST_SERIAL = 'puma-kdata'
GUEST_SERIAL = 'puma-data'
# The file driver's cache options of each mode.
MODES = {
    'writeback': 'cache.direct=off',
    'none': 'cache.direct=on',
    'exclusive': 'cache.direct=off,exclusive-cache=on',
}


def guest_serial(index=0):
    """The serial of an L2 guest's data disk INDEX (0: GUEST_SERIAL)."""
    return GUEST_SERIAL if index == 0 else '%s-%d' % (GUEST_SERIAL, index)


def find_device(index=0):
    """Shell: the guest's device of its data disk INDEX, in $dev."""
    return ('dev=; for b in /sys/block/vd*; do '
            '[ "$(cat $b/serial 2>/dev/null)" = %s ] && '
            'dev=/dev/${b##*/}; done; '
            '[ -n "$dev" ] || { echo "no data disk" >&2; exit 1; }; '
            % guest_serial(index))


# The guest's device of its (first) data disk, in $dev.
FIND_DEVICE = find_device()


def kernel_host_disk(lab, name, mb, bps=0, iops=0):
    """A sparse raw disk for kernel host NAME (a vm.Disk for its disks).

    BPS and IOPS throttle it: the disk the kernel host's page cache
    stands in front of, modelled (the file itself sits in this machine's
    page cache).
    """
    path = lab.path(name, 'data.img')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.truncate(mb << 20)
    return vm.Disk(path, bps=bps, iops=iops, serial=HOST_SERIAL)


def mount_data(kh):
    """Make an ext4 on kernel host KH's data disk and mount it at DATA_DIR.

    In its chroot, so after ``load_kvm()``, which mounts the chroot's
    ``/dev`` and ``/run``.
    """
    kh.chroot('set -e; dev=; for b in /sys/block/vd*; do '
              '[ "$(cat $b/serial 2>/dev/null)" = %s ] && '
              'dev=/dev/${b##*/}; done; '
              '[ -n "$dev" ] || { echo "no data disk" >&2; exit 1; }; '
              'mkfs.ext4 -q -F "$dev"; mkdir -p %s; mount "$dev" %s'
              % (HOST_SERIAL, DATA_DIR, DATA_DIR), timeout=300)
    return DATA_DIR


def make_image(kh, name, mb):
    """An empty raw image NAME of MB MiB in DATA_DIR; its chroot path."""
    path = shlex.quote('%s/%s.img' % (DATA_DIR, name))
    kh.chroot('rm -f %s && truncate -s %dM %s' % (path, mb, path))
    return '%s/%s.img' % (DATA_DIR, name)


def blockdev_args(path, mode, index=0):
    """QEMU arguments of a virtio-blk data disk at PATH in cache MODE.

    INDEX tells a guest's data disks apart: node names and the serial
    (guest_serial()) that find_device() looks for.
    """
    if mode not in MODES:
        raise errors.LabError('cache mode %r: one of %s'
                              % (mode, ', '.join(MODES)))
    node = 'data' if index == 0 else 'data%d' % index
    return ['-blockdev', 'driver=file,node-name=%sfile,filename=%s,%s'
            % (node, path, MODES[mode]),
            '-blockdev', 'driver=raw,node-name=%s,file=%sfile'
            % (node, node),
            '-device', 'virtio-blk-pci,drive=%s,serial=%s'
            % (node, guest_serial(index))]


def cached_bytes(kh, path):
    """Bytes of image PATH (a chroot path) in KH's page cache."""
    out = kh.chroot('fincore -b -n -o RES %s' % shlex.quote(path)).out
    return int(out.split()[0])


def drop_host_cache(kh):
    """Write back and drop KH's page cache (a cold host cache)."""
    kh.sh('sync; echo 3 > /proc/sys/vm/drop_caches')
