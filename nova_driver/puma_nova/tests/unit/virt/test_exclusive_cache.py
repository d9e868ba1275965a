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

from lxml import etree
from nova import exception
from nova import objects
from nova import test
from nova.virt.libvirt import config as vconfig

from puma_nova.virt import exclusive_cache
from puma_nova.virt import exclusive_cache_probe


def _disk(target, source_type='file', cache='writeback', **attrs):
    disk = vconfig.LibvirtConfigGuestDisk()
    disk.source_type = source_type
    disk.source_path = '/var/lib/nova/instances/x/%s' % target
    disk.driver_name = 'qemu'
    disk.driver_format = 'qcow2'
    disk.driver_cache = cache
    disk.target_dev = target
    disk.target_bus = 'virtio'
    for name, value in attrs.items():
        setattr(disk, name, value)
    return disk


def _disks_xml(guest):
    return [etree.fromstring(dev.to_xml()) for dev in guest.devices
            if isinstance(dev, vconfig.LibvirtConfigGuestDisk)]


def _drivers(guest):
    return {d.find('target').get('dev'): dict(d.find('driver').attrib)
            for d in _disks_xml(guest)}


class RequestedTest(test.NoDBTestCase):

    def _flavor(self, **specs):
        return objects.Flavor(extra_specs=specs)

    def test_requested(self):
        self.assertFalse(exclusive_cache.requested(self._flavor()))
        for value in ('true', 'True', '1', 'yes'):
            self.assertTrue(exclusive_cache.requested(
                self._flavor(**{exclusive_cache.EXTRA_SPEC: value})))
        for value in ('false', '0', 'no'):
            self.assertFalse(exclusive_cache.requested(
                self._flavor(**{exclusive_cache.EXTRA_SPEC: value})))

    def test_bad_value_is_an_error_not_a_default(self):
        e = self.assertRaises(
            exception.InvalidInput, exclusive_cache.requested,
            self._flavor(**{exclusive_cache.EXTRA_SPEC: 'maybe'}))
        self.assertIn("puma:exclusive_cache='maybe' is not a boolean",
                      str(e))


class ApplyTest(test.NoDBTestCase):

    def test_disks_through_the_host_cache_get_it(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.add_device(_disk('vda'))
        guest.add_device(_disk('vdb', source_type='block',
                               cache='writethrough'))
        guest.add_device(_disk('vdc', cache='unsafe'))
        self.assertEqual(['vda', 'vdb', 'vdc'],
                         exclusive_cache.apply(guest))
        drivers = _drivers(guest)
        for target in ('vda', 'vdb', 'vdc'):
            self.assertEqual('on', drivers[target]['exclusive_cache'])
        # Nova's other driver attributes stay.
        self.assertEqual({'name': 'qemu', 'type': 'qcow2',
                          'cache': 'writeback', 'exclusive_cache': 'on'},
                         drivers['vda'])

    def test_direct_network_and_shared_disks_are_left_alone(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.add_device(_disk('vda', cache='none'))
        guest.add_device(_disk('vdb', cache='directsync'))
        guest.add_device(_disk('vdc', source_type='network',
                               source_protocol='rbd', source_name='p/v'))
        guest.add_device(_disk('vdd', shareable=True))
        guest.add_device(vconfig.LibvirtConfigGuestInput())
        self.assertEqual([], exclusive_cache.apply(guest))
        for driver in _drivers(guest).values():
            self.assertNotIn('exclusive_cache', driver)

    def test_applying_twice_changes_nothing(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.add_device(_disk('vda'))
        exclusive_cache.apply(guest)
        xml = [etree.tostring(d) for d in _disks_xml(guest)]
        self.assertEqual([], exclusive_cache.apply(guest))
        self.assertEqual(xml, [etree.tostring(d) for d in _disks_xml(guest)])

    def test_disk_without_driver_element_gets_one(self):
        disk = exclusive_cache.LibvirtConfigGuestDiskExclusiveCache()
        disk.source_path = '/tmp/x.img'
        disk.target_dev = 'vda'
        disk.target_bus = 'virtio'
        xml = etree.fromstring(disk.to_xml())
        self.assertEqual({'name': 'qemu', 'exclusive_cache': 'on'},
                         dict(xml.find('driver').attrib))


class Dom(object):

    def __init__(self, xml, calls):
        self.xml = xml
        self.calls = calls

    def XMLDesc(self, flags):
        return self.xml

    def undefine(self):
        self.calls.append('undefine')


class Conn(object):
    """defineXMLFlags as libvirt answers it; KEEP: the attribute stays."""

    def __init__(self, refuse=None, keep=True):
        self.refuse = refuse
        self.keep = keep
        self.calls = []

    def defineXMLFlags(self, xml, flags):
        self.calls.append(('define', flags))
        if self.refuse:
            raise Exception(self.refuse)
        if not self.keep:
            xml = xml.replace(" exclusive_cache='on'", '')
        return Dom(xml, self.calls)


class ProbeTest(test.NoDBTestCase):

    def test_supported(self):
        conn = Conn()
        self.assertEqual((True, None),
                         exclusive_cache_probe.probe(conn, 'kvm'))
        # Validated against libvirt's schema, and left undefined.
        self.assertEqual([('define', exclusive_cache_probe.DEFINE_VALIDATE),
                          'undefine'], conn.calls)

    def test_unpatched_libvirt_refuses(self):
        conn = Conn(refuse="XML document failed to validate against schema")
        supported, detail = exclusive_cache_probe.probe(conn, 'kvm')
        self.assertFalse(supported)
        self.assertIn('failed to validate', detail)

    def test_qemu_without_the_option_refuses(self):
        conn = Conn(refuse="unsupported configuration: 'exclusive_cache' is "
                           "not supported by this QEMU binary")
        self.assertFalse(exclusive_cache.probe(conn, 'kvm'))

    def test_attribute_dropped_is_no_support(self):
        conn = Conn(keep=False)
        supported, detail = exclusive_cache_probe.probe(conn, 'kvm')
        self.assertFalse(supported)
        self.assertIn('dropped', detail)
        self.assertEqual('undefine', conn.calls[-1])
