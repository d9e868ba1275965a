# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The host page cache that exclusive host/guest caching saves.

A disk with ``<driver exclusive_cache='on'/>`` (puma:exclusive_cache,
:mod:`puma_nova.virt.exclusive_cache`) leaves in the host's page cache
nothing of what its guest read: QEMU drops each range after the guest
read it.  With plain ``writeback`` the host would keep it, up to the
whole image.  Per such disk of a running guest the saving is estimated
as

    min(bytes the guest read from the disk, the image's allocated bytes)
    - bytes of the image in the host's page cache now

with the bytes read from libvirt's block statistics (``rd_bytes``) and
the cached bytes from ``mincore(2)`` over a read-only mapping of the
image.  It is an upper bound: a writeback host would have lost part of
it to memory pressure, and a read of the backing file counts against the
top image's size.  Writes are not counted; they pass the host cache
either way.

``mincore`` tells the page-cache state of a file only to a process that
owns it, may write it, or holds CAP_FOWNER (Linux 5.0 and later); other
processes see only the pages they mapped themselves, which would make
the whole image look dropped.  Such a disk is left out (saved 0) and
logged once.
"""

import ctypes
import ctypes.util
# The standard library's logging (oslo.log configures it under
# nova-compute): the lab's tests run this module without OpenStack's
# libraries, on a domain driven through virsh.
import logging
import mmap
import os
import stat
from xml.etree import ElementTree

LOG = logging.getLogger(__name__)

MI = 1024 * 1024
ATTRIBUTE = 'exclusive_cache'
# Bytes of an image mapped at once to ask mincore about.
WINDOW = 256 * MI

_libc = None
# Images already logged as not measurable.
_logged = set()


def _c():
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                              ctypes.c_int, ctypes.c_int, ctypes.c_long)
        libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_ubyte))
        _libc = libc
    return _libc


def exclusive_disks(xml):
    """(target dev, source path) of the exclusive-cache disks in XML."""
    disks = []
    for disk in ElementTree.fromstring(xml).findall('./devices/disk'):
        driver = disk.find('driver')
        source = disk.find('source')
        target = disk.find('target')
        if (driver is None or driver.get(ATTRIBUTE) != 'on' or
                source is None or target is None):
            continue
        path = source.get('file') or source.get('dev')
        if path:
            disks.append((target.get('dev'), path))
    return disks


def _may_see_cache(path, st):
    return (os.geteuid() == 0 or st.st_uid == os.geteuid() or
            os.access(path, os.W_OK))


def resident_bytes(path):
    """Bytes of the file (or block device) PATH in the page cache.

    :raises: OSError.
    """
    page = mmap.PAGESIZE
    libc = _c()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        resident = 0
        for offset in range(0, size, WINDOW):
            length = min(WINDOW, size - offset)
            addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED,
                             fd, offset)
            if addr in (None, ctypes.c_void_p(-1).value):
                err = ctypes.get_errno()
                raise OSError(err, 'mmap: %s' % os.strerror(err), path)
            try:
                vec = (ctypes.c_ubyte * ((length + page - 1) // page))()
                if libc.mincore(addr, length, vec):
                    err = ctypes.get_errno()
                    raise OSError(err, 'mincore: %s' % os.strerror(err),
                                  path)
                # Bit 0 of each byte: resident; the other bits are 0.
                flags = bytes(vec)
                resident += (len(flags) - flags.count(0)) * page
            finally:
                libc.munmap(addr, length)
        return min(resident, size)
    finally:
        os.close(fd)


def allocated_bytes(path):
    """Bytes PATH holds: a file's allocated blocks, a device's size.

    Not what a file system preallocated past the end of a file.
    """
    st = os.stat(path)
    if stat.S_ISBLK(st.st_mode):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.lseek(fd, 0, os.SEEK_END)
        finally:
            os.close(fd)
    return min(st.st_blocks * 512, st.st_size)


def disk_saved_bytes(path, read_bytes):
    """The estimate of the module docstring for one disk; None if unknown.

    :raises: OSError.
    """
    st = os.stat(path)
    if not _may_see_cache(path, st):
        if path not in _logged:
            _logged.add(path)
            LOG.warning('Puma: the host cache that exclusive caching saves '
                        'is not counted for %s: this process (uid %d) may '
                        'not see its page-cache state (mincore needs the '
                        'owner, write access or CAP_FOWNER)',
                        path, os.geteuid())
        return None
    would_hold = min(max(0, read_bytes), allocated_bytes(path))
    return max(0, would_hold - resident_bytes(path))


def domain_saved_bytes(dom, xml=None):
    """Bytes of host page cache the exclusive-cache disks of DOM save.

    DOM: a running libvirt domain; XML its live XML if the caller has
    it (read from DOM otherwise). None if it has no such disk. A disk
    whose figures cannot be read (the image cannot be opened, the guest
    went away meanwhile) counts as 0 and is logged at debug: the figure
    is only shown.

    :raises: libvirt's error when the domain's XML cannot be read.
    """
    disks = exclusive_disks(dom.XMLDesc(0) if xml is None else xml)
    if not disks:
        return None
    total = 0
    for target, path in disks:
        try:
            read = dom.blockStats(target)[1]
            saved = disk_saved_bytes(path, read)
        except Exception as e:
            LOG.debug('Puma: exclusive caching of %s (%s) not counted: %s',
                      path, target, e)
            continue
        total += saved or 0
    return total


def saved_bytes(domains):
    """domain_saved_bytes() summed over DOMAINS; a domain gone counts 0.

    DOMAINS: (libvirt domain, its XML or None) pairs.
    """
    total = 0
    for dom, xml in domains:
        try:
            total += domain_saved_bytes(dom, xml) or 0
        except Exception as e:
            LOG.debug('Puma: no disks of domain for exclusive caching: %s',
                      e)
    return total


def saved_mb(domains):
    """saved_bytes() in MiB, rounded down."""
    return saved_bytes(domains) // MI
