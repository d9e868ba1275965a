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
"""The host page cache exclusive caching saves, on real files."""

import os
from unittest import mock

import fixtures
import testtools

from puma_nova.compute import host_cache

MIB = 1024 * 1024
DISK = ('<disk type="%(type)s" device="disk">'
        '<driver name="qemu" type="qcow2" cache="writeback"%(attr)s/>'
        '<source %(src)s="%(path)s"/><target dev="%(dev)s" bus="virtio"/>'
        '</disk>')


def _disk(dev, path, exclusive=True, type='file'):
    return DISK % {'type': type, 'dev': dev, 'path': path,
                   'src': 'file' if type == 'file' else 'dev',
                   'attr': ' exclusive_cache="on"' if exclusive else ''}


class FakeDomain(object):

    def __init__(self, disks, read, error=None):
        self.disks, self.read, self.error = disks, read, error

    def XMLDesc(self, flags):
        if self.error:
            raise self.error
        return '<domain><devices>%s</devices></domain>' % ''.join(self.disks)

    def blockStats(self, dev):
        return (1, self.read[dev], 0, 0, -1)


def _fs_type(path):
    """The type of the file system PATH is on (from /proc/self/mounts)."""
    best = ('', '')
    with open('/proc/self/mounts') as f:
        for line in f:
            _dev, mnt, fstype = line.split()[:3]
            if (path + '/').startswith(mnt.rstrip('/') + '/') and \
                    len(mnt) >= len(best[0]):
                best = (mnt, fstype)
    return best[1]


class HostCacheTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        root = '/var/tmp' if os.path.isdir('/var/tmp') else None
        self.dir = self.useFixture(fixtures.TempDir(rootdir=root)).path
        self.image = self._image('a.img', 4 * MIB)

    def _image(self, name, size):
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as f:
            f.write(os.urandom(size))
            f.flush()
            os.fdatasync(f.fileno())
        return path

    def _drop(self, path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def _read(self, path, length):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            os.pread(fd, length, 0)
        finally:
            os.close(fd)

    def test_exclusive_disks_of_the_xml(self):
        xml = '<domain><devices>%s%s%s<disk type="network"/></devices>' \
              '</domain>' % (_disk('vda', '/i/a'),
                             _disk('vdb', '/i/b', exclusive=False),
                             _disk('vdc', '/dev/sdx', type='block'))
        self.assertEqual([('vda', '/i/a'), ('vdc', '/dev/sdx')],
                         host_cache.exclusive_disks(xml))

    def test_resident_bytes_follow_the_page_cache(self):
        if _fs_type(self.dir) in ('tmpfs', 'ramfs', 'overlay'):
            self.skipTest('%s keeps its pages: no page cache to drop'
                          % self.dir)
        self._drop(self.image)
        self.assertEqual(0, host_cache.resident_bytes(self.image))
        self._read(self.image, MIB)
        self.assertEqual(MIB, host_cache.resident_bytes(self.image))
        # Read 3 MiB, hold 1 MiB: 2 MiB saved; never more than the image.
        self.assertEqual(2 * MIB,
                         host_cache.disk_saved_bytes(self.image, 3 * MIB))
        self.assertEqual(3 * MIB,
                         host_cache.disk_saved_bytes(self.image, 40 * MIB))
        self._drop(self.image)
        self.assertEqual(4 * MIB,
                         host_cache.disk_saved_bytes(self.image, 40 * MIB))

    def test_an_image_larger_than_the_window(self):
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.host_cache.WINDOW', MIB))
        big = self._image('big.img', 3 * MIB + 4096 + 100)
        # Just written: all of it in the page cache, in four windows.
        self.assertEqual(os.path.getsize(big),
                         host_cache.resident_bytes(big))

    def test_saved_bytes_of_domains(self):
        other = self._image('b.img', MIB)
        with mock.patch.object(host_cache, 'resident_bytes',
                               side_effect=lambda p: {self.image: MIB,
                                                      other: 0}[p]):
            doms = [FakeDomain([_disk('vda', self.image),
                                _disk('vdb', other, exclusive=False)],
                               {'vda': 3 * MIB, 'vdb': MIB}),
                    FakeDomain([_disk('vda', other)], {'vda': 5 * MIB}),
                    FakeDomain([], {}, error=RuntimeError('domain gone')),
                    FakeDomain([_disk('vda', '/nonexistent/c.img')],
                               {'vda': MIB})]
            # 3 MiB read less 1 MiB cached; 1 MiB (the whole image); the
            # domain that went away and the missing image count nothing.
            pairs = [(d, None) for d in doms]
            self.assertEqual(3 * MIB, host_cache.saved_bytes(pairs))
            self.assertEqual(3, host_cache.saved_mb(pairs))
            # Per domain: None without an exclusive-cache disk.
            self.assertEqual(2 * MIB, host_cache.domain_saved_bytes(doms[0]))
            self.assertIsNone(host_cache.domain_saved_bytes(
                FakeDomain([_disk('vdb', other, exclusive=False)], {})))
            self.assertRaises(RuntimeError, host_cache.domain_saved_bytes,
                              doms[2])
            # The XML a caller read already is used, not read again.
            xml = doms[1].XMLDesc(0)
            doms[1].error = RuntimeError('XML read twice')
            self.assertEqual(MIB, host_cache.domain_saved_bytes(doms[1],
                                                                xml))
            self.assertEqual(MIB, host_cache.saved_bytes([(doms[1], xml)]))

    def test_unmeasurable_image_counts_nothing(self):
        # mincore would tell this process only about its own mappings.
        with mock.patch.object(host_cache, '_may_see_cache',
                               return_value=False):
            self.assertIsNone(host_cache.disk_saved_bytes(self.image, MIB))
            self.assertEqual(0, host_cache.saved_bytes(
                [(FakeDomain([_disk('vda', self.image)], {'vda': MIB}),
                  None)]))
