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

from lxml import etree
from nova.tests.functional.api import client

from puma_nova.tests.functional import test_split_migration as base

GIB = base.GIB
SPEC = {'puma:exclusive_cache': 'true'}


class ExclusiveCacheTest(base.PumaServersTestBase):

    def _offer(self, cache='writeback'):
        """Every host offers exclusive caching; file disks use CACHE."""
        for compute in self.computes.values():
            compute.driver._puma_exclusive_cache = True
            compute.driver.disk_cachemodes = {'file': cache}
        self._run_periodics()

    def _defined(self, spec, expected_state='ACTIVE'):
        defined = self._record_defined_xml()
        flavor = self._create_flavor(memory_mb=GIB, vcpu=1, disk=1,
                                     ephemeral=0, extra_spec=spec)
        server = self._boot(flavor, expected_state=expected_state)
        xml = [etree.fromstring(x) for x in defined if server['id'] in x]
        return server, xml[-1] if xml else None

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
