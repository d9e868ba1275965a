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
"""Volumes attached, swapped in or live-migrated keep exclusive caching.

The driver's overrides run against stubs of Nova's LibvirtDriver methods
they wrap; the live migration's rewrite of the volumes' <disk> is Nova's
own (nova.virt.libvirt.migration._update_volume_xml).
"""

import threading

import fixtures
from lxml import etree
from nova import objects
from nova import test
from nova.virt.libvirt import migration as libvirt_migrate
from oslo_utils.fixture import uuidsentinel as uuids

from puma_nova.tests.unit.virt import test_exclusive_cache as base
from puma_nova.virt import driver as puma_driver
from puma_nova.virt import exclusive_cache

LIBVIRT = 'nova.virt.libvirt.driver.LibvirtDriver.'
SPEC = {exclusive_cache.EXTRA_SPEC: 'true'}


def _instance(specs):
    return objects.Instance(uuid=uuids.instance, system_metadata={},
                            flavor=objects.Flavor(extra_specs=specs))


class VolumeConfigTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.drv = puma_driver.PumaLibvirtDriver.__new__(
            puma_driver.PumaLibvirtDriver)
        self.drv._puma_local = threading.local()
        self.drv._puma_exclusive_cache = True
        self.drv._puma_host = 'h'
        self.source_type = 'block'
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + '_get_volume_config', self._nova_volume_config))
        # What Nova's wrapped method made of the volume, by name.
        self.made = {}

    def _nova_volume_config(self, drv, connection_info, disk_info):
        disk = base._disk(disk_info['dev'], source_type=self.source_type)
        disk.serial = connection_info.get('serial')
        return disk

    def _record(self, name):
        def wrapped(drv, *args, **kwargs):
            self.made[name] = drv._get_volume_config(
                {'serial': uuids.volume}, {'dev': 'vdb'})
        self.useFixture(fixtures.MonkeyPatch(LIBVIRT + name, wrapped))

    def _exclusive(self, conf):
        driver = etree.fromstring(conf.to_xml()).find('driver')
        return driver.get('exclusive_cache') == 'on'

    def test_attached_volume_gets_it(self):
        self._record('attach_volume')
        self.drv.attach_volume(None, {}, _instance(SPEC), '/dev/vdb')
        self.assertTrue(self._exclusive(self.made['attach_volume']))

    def test_swapped_in_volume_gets_it(self):
        self._record('swap_volume')
        self.drv.swap_volume(None, {}, {}, _instance(SPEC), '/dev/vdb', 1)
        self.assertTrue(self._exclusive(self.made['swap_volume']))

    def test_default_server_and_network_volumes_do_not_get_it(self):
        self._record('attach_volume')
        self.drv.attach_volume(None, {}, _instance({}), '/dev/vdb')
        self.assertFalse(self._exclusive(self.made['attach_volume']))
        self.source_type = 'network'
        self.drv.attach_volume(None, {}, _instance(SPEC), '/dev/vdb')
        self.assertFalse(self._exclusive(self.made['attach_volume']))

    def test_host_without_support_attaches_without_it(self):
        self.drv._puma_exclusive_cache = False
        self._record('attach_volume')
        self.drv.attach_volume(None, {}, _instance(SPEC), '/dev/vdb')
        self.assertFalse(self._exclusive(self.made['attach_volume']))
        self.assertIn('is attached without the exclusive caching',
                      self.stdlog.logger.output)

    def test_only_inside_the_wrapped_calls(self):
        # The boot's volumes: _get_guest_config applies it to them all.
        self._record('attach_volume')
        self.drv.attach_volume(None, {}, _instance(SPEC), '/dev/vdb')
        conf = self.drv._get_volume_config({}, {'dev': 'vdc'})
        self.assertFalse(self._exclusive(conf))

    def test_failed_call_leaves_no_instance_behind(self):
        def fails(drv, *args, **kwargs):
            raise ValueError('attach failed')
        self.useFixture(fixtures.MonkeyPatch(LIBVIRT + 'attach_volume',
                                             fails))
        self.assertRaises(ValueError, self.drv.attach_volume, None, {},
                          _instance(SPEC), '/dev/vdb')
        conf = self.drv._get_volume_config({}, {'dev': 'vdb'})
        self.assertFalse(self._exclusive(conf))

    def test_live_migration_keeps_it_on_volumes(self):
        # Nova rewrites each volume's <disk> children from
        # _get_volume_config for the destination.
        domain_xml = etree.fromstring(
            '<domain><devices><disk type="block" device="disk">'
            '<driver name="qemu" type="qcow2" cache="writeback" '
            'exclusive_cache="on"/><source dev="/dev/old"/>'
            '<target dev="vdb" bus="virtio"/><serial>%s</serial>'
            '</disk></devices></domain>' % uuids.volume)
        bdm = objects.LibvirtLiveMigrateBDMInfo(
            serial=uuids.volume, bus='virtio', dev='vdb', type='disk',
            connection_info={'serial': uuids.volume})
        migrate_data = objects.LibvirtLiveMigrateData(bdms=[bdm])
        rewritten = []

        def operation(drv, context, instance, dest, block_migration,
                      migrate_data, guest, device_names):
            rewritten.append(libvirt_migrate._update_volume_xml(
                domain_xml, migrate_data, instance, drv._get_volume_config))
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + '_live_migration_operation', operation))
        self.drv._live_migration_operation(
            None, _instance(SPEC), 'dest', False, migrate_data, None, [])
        driver = rewritten[0].find('./devices/disk/driver')
        self.assertEqual('/var/lib/nova/instances/x/vdb',
                         rewritten[0].find('./devices/disk/source').get(
                             'dev'))
        self.assertEqual('on', driver.get('exclusive_cache'))
