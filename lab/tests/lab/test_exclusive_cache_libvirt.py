# SPDX-License-Identifier: Apache-2.0
"""Exclusive host/guest caching through the real patched libvirtd.

``<driver exclusive_cache='on'/>`` (libvirt-patches 18-21) becomes QEMU's
``exclusive-cache`` on the disk's file node: what the guest has read
leaves the host's page cache, and the guest reads the same data.  The
Nova driver's probe (puma_nova/virt/exclusive_cache_probe.py) finds it on
this libvirtd.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from puma_lab import domain
from puma_lab import host as host_mod
from puma_lab import migration
from puma_lab import paths
from puma_lab import virsh_conn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'nova_driver'))
from puma_nova.compute import host_cache  # noqa: E402
from puma_nova.virt import exclusive_cache_probe  # noqa: E402

MIB = 1024 * 1024
DISK_MIB = 32
BLOCKDEV = re.compile(r"-blockdev '(\{.*?\})'")


def test_probe_finds_exclusive_cache(lab):
    h = host_mod.Host(lab, 'a').start()
    conn = virsh_conn.VirshConnection(h)
    assert exclusive_cache_probe.probe(conn, 'qemu') == (True, None)
    assert conn.flags == [exclusive_cache_probe.DEFINE_VALIDATE]
    assert h.virsh('list', '--all', '--name').split() == []
    # An attribute this libvirt does not know, as an unpatched libvirt
    # sees exclusive_cache: refused against the schema, no support.
    supported, detail = exclusive_cache_probe.probe(
        virsh_conn.VirshConnection(h), 'qemu',
        attribute='puma_no_such_attribute')
    assert not supported
    assert 'puma_no_such_attribute' in detail
    assert h.virsh('list', '--all', '--name').split() == []


def _image(path, data):
    """PATH holding DATA, written back and out of the host's page cache."""
    with open(path, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def _host_cached(path):
    """Bytes of PATH in the host's page cache (util-linux fincore)."""
    out = subprocess.run(['fincore', '--bytes', '--noheadings',
                          '--output', 'RES', path], check=True,
                         capture_output=True, text=True).stdout
    return int(out.split()[0])


def _file_nodes(host, name):
    """{filename: -blockdev props} of the file nodes libvirt gave QEMU."""
    log = os.path.join(host.dir, 'log', 'qemu', '%s.log' % name)
    with open(log) as f:
        argv = f.read()
    nodes = (json.loads(m.group(1)) for m in BLOCKDEV.finditer(argv))
    return {n['filename']: n for n in nodes if n.get('driver') == 'file'}


def test_guest_reads_leave_only_the_shared_disk_in_the_host_cache(lab):
    # The images must be in a page cache that POSIX_FADV_DONTNEED can drop:
    # on the cache's disk, never on a tmpfs.
    os.makedirs(os.path.join(paths.CACHE, 'tmp'), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix='exclusive-cache-',
                               dir=os.path.join(paths.CACHE, 'tmp'))
    try:
        fs = subprocess.run(['stat', '-f', '-c', '%T', scratch], check=True,
                            capture_output=True, text=True).stdout.strip()
        assert fs != 'tmpfs', '%s is on a tmpfs' % scratch
        data = os.urandom(DISK_MIB * MIB)
        digest = hashlib.sha256(data).hexdigest()
        plain = os.path.join(scratch, 'plain.img')
        exclusive = os.path.join(scratch, 'exclusive.img')
        for path in (plain, exclusive):
            _image(path, data)
            assert _host_cached(path) < MIB, path

        a = host_mod.Host(lab, 'a').start()
        disks = (domain.disk_xml(plain, 'vdb', cache='writeback'),
                 domain.disk_xml(exclusive, 'vdc', cache='writeback',
                                 exclusive_cache='on'))
        ga = migration.start_guest(a, 'excl', kernel='6.12', mem_mb=512,
                                   disks=disks)
        assert "exclusive_cache='on'" in a.virsh('dumpxml', 'excl')
        nodes = _file_nodes(a, 'excl')
        assert nodes[exclusive].get('exclusive-cache') is True, nodes
        assert 'exclusive-cache' not in nodes[plain], nodes
        assert nodes[exclusive]['cache']['direct'] is False, nodes

        for dev in ('vdb', 'vdc'):
            ga.run('dd if=/dev/%s of=/dev/null bs=1M' % dev, timeout=300)
        cached_plain = _host_cached(plain)
        cached_exclusive = _host_cached(exclusive)
        print('host cache after the guest read %d MiB: plain %d KiB, '
              'exclusive %d KiB' % (DISK_MIB, cached_plain // 1024,
                                    cached_exclusive // 1024))
        assert cached_plain >= 0.9 * len(data), cached_plain
        assert cached_exclusive <= 0.1 * len(data), cached_exclusive
        # What the Nova driver reports as saved (cache_saved_mb): the
        # exclusive disk's reads, less what the host still holds of it.
        dom = virsh_conn.VirshDomain(a, 'excl')
        assert dom.blockStats('vdc')[1] >= len(data)
        saved = host_cache.saved_bytes([(dom, None)])
        print('exclusive caching saves %d KiB' % (saved // 1024))
        assert 0.9 * len(data) <= saved <= len(data), saved

        # The guest reads the same data from both, from its own cache and
        # then, its caches dropped, through QEMU once more (the exclusive
        # disk from the disk, the plain one from the host's cache).
        for again in (False, True):
            if again:
                ga.run('sync; echo 3 > /proc/sys/vm/drop_caches')
            for dev in ('vdb', 'vdc'):
                out = ga.run('sha256sum /dev/%s' % dev, timeout=300).out
                assert out.split()[0] == digest, (dev, again, out)
        assert _host_cached(exclusive) <= 0.1 * len(data)
        a.virsh('destroy', 'excl')
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
