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

"""Exclusive host/guest caching (puma:exclusive_cache) on Nova's fixtures.

Nova's fake libvirt has no defineXMLFlags, so the probe of init_host finds
no support there; the tests that need a host offering it say so as a
patched libvirt and QEMU would have made the probe say.
"""

import fixtures
from lxml import etree
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client
from nova.virt.libvirt.volume import volume as libvirt_volume
from oslo_utils.fixture import uuidsentinel as uuids

from puma_nova.tests.functional import test_split_migration as base

GIB = base.GIB
SPEC = {'puma:exclusive_cache': 'true'}


class ExclusiveCacheTest(base.PumaServersTestBase):

    def _offer(self, cache='writeback'):
        """Every host offers exclusive caching; its disks use CACHE."""
        for compute in self.computes.values():
            compute.driver._puma_exclusive_cache = True
            compute.driver.disk_cachemodes = {'file': cache, 'block': cache}
        self._run_periodics()

    def _defined(self, spec, expected_state='ACTIVE'):
        defined = self._record_defined_xml()
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0, extra_spec=spec)
        server = self._boot(flavor, expected_state=expected_state)
        xml = [etree.fromstring(x) for x in defined if server['id'] in x]
        return server, xml[-1] if xml else None

    def _block_volumes(self):
        """Cinder's volumes reach the guests as block devices (as iSCSI's).

        Returns the list of the disk XMLs attached to guests, kept fresh.
        """
        fake_config = libvirt_volume.LibvirtFakeVolumeDriver.get_config

        def get_config(drv, connection_info, disk_info):
            conf = fake_config(drv, connection_info, disk_info)
            conf.source_type = 'block'
            conf.source_path = ('/dev/disk/by-id/fake-%s' %
                                connection_info['data']['volume_id'])
            return conf
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.volume.volume.LibvirtFakeVolumeDriver.'
            'get_config', get_config))

        attached = []
        real_attach = fakelibvirt.Domain.attachDeviceFlags

        def attach(dom, xml, flags):
            attached.append(etree.fromstring(xml))
            return real_attach(dom, xml, flags)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.attachDeviceFlags', attach))
        return attached

    def _volume_driver(self, xml, volume_id):
        for disk in xml.iter('disk'):
            if disk.findtext('serial') == volume_id:
                return disk.find('driver')
        self.fail('no disk of volume %s in %s' % (
            volume_id, etree.tostring(xml)))

    def _drivers(self, xml):
        return {d.find('target').get('dev'): d.find('driver')
                for d in xml.findall('./devices/disk')}

    def test_disks_through_the_host_cache_get_it(self):
        self._offer()
        server, xml = self._defined(SPEC)
        drivers = self._drivers(xml)
        self.assertTrue(drivers)
        for target, driver in drivers.items():
            self.assertEqual('writeback', driver.get('cache'), target)
            self.assertEqual('on', driver.get('exclusive_cache'), target)
        self.assertIn('CUSTOM_PUMA_EXCLUSIVE_CACHE',
                      self._get_provider_traits(self._rp('src')))
        # The attribute travels with the domain XML of a live migration.
        self._live_migrate(server, 'completed', host='dest')

    def test_attached_volume_gets_it(self):
        self._offer()
        attached = self._block_volumes()
        server, _xml = self._defined(SPEC)
        self._attach_volume(server, uuids.volume)
        self.assertEqual(1, len(attached))
        driver = self._volume_driver(attached[0], uuids.volume)
        self.assertEqual('writeback', driver.get('cache'))
        self.assertEqual('on', driver.get('exclusive_cache'))
        # The destination XML of a live migration: the unit tests (the
        # fake libvirt's XMLDesc has no <serial> Nova could match).

    def test_attached_volume_of_a_default_server_does_not_get_it(self):
        self._offer()
        attached = self._block_volumes()
        server, _xml = self._defined(None)
        self._attach_volume(server, uuids.volume)
        driver = self._volume_driver(attached[0], uuids.volume)
        self.assertEqual('writeback', driver.get('cache'))
        self.assertIsNone(driver.get('exclusive_cache'))

    def test_disks_without_host_cache_are_left_alone(self):
        self._offer(cache='none')
        _server, xml = self._defined(SPEC)
        for target, driver in self._drivers(xml).items():
            self.assertEqual('none', driver.get('cache'), target)
            self.assertIsNone(driver.get('exclusive_cache'), target)

    def test_default_server_does_not_get_it(self):
        self._offer()
        _server, xml = self._defined(None)
        for driver in self._drivers(xml).values():
            self.assertIsNone(driver.get('exclusive_cache'))

    def test_refused_without_support(self):
        # What the probe found on the fake libvirt: no trait, no support.
        self.assertNotIn('CUSTOM_PUMA_EXCLUSIVE_CACHE',
                         self._get_provider_traits(self._rp('src')))
        server, xml = self._defined(SPEC, expected_state='ERROR')
        self.assertIsNone(xml)
        self.assertIn("Exclusive caching (puma:exclusive_cache) was "
                      "requested for instance %s but host src cannot "
                      "provide it" % server['id'],
                      server['fault']['message'])

    def test_destination_without_support_refused(self):
        self._offer()
        server, _xml = self._defined(SPEC)
        self.dest.driver._puma_exclusive_cache = False
        self._assert_refused(
            server, 'uses exclusive caching (puma:exclusive_cache) but '
                    'host dest cannot provide it')

    def test_spec_validated(self):
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0)
        admin = self.api_fixture.admin_api
        admin.microversion = '2.86'
        ex = self.assertRaises(
            client.OpenStackApiException, admin.post_extra_spec,
            flavor, {'extra_specs': {'puma:exclusive_cache': 'maybe'}})
        self.assertEqual(400, ex.response.status_code)
        admin.post_extra_spec(flavor, {'extra_specs': SPEC})
