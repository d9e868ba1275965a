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

from puma_nova.virt import page_merging


class PageMergingTest(test.NoDBTestCase):

    def _flavor(self, **specs):
        return objects.Flavor(extra_specs=specs)

    def test_opted_out(self):
        self.assertFalse(page_merging.opted_out(self._flavor()))
        for value in ('true', 'True', '1', 'yes'):
            self.assertFalse(page_merging.opted_out(
                self._flavor(**{page_merging.EXTRA_SPEC: value})))
        for value in ('false', 'False', '0', 'no'):
            self.assertTrue(page_merging.opted_out(
                self._flavor(**{page_merging.EXTRA_SPEC: value})))

    def test_bad_value_is_an_error_not_a_default(self):
        # nova-api validates the spec from microversion 2.86; a flavor
        # made before must not silently merge.
        e = self.assertRaises(
            exception.InvalidInput, page_merging.opted_out,
            self._flavor(**{page_merging.EXTRA_SPEC: 'maybe'}))
        self.assertIn("puma:page_merging='maybe' is not a boolean", str(e))

    def test_memory_backing_made(self):
        guest = vconfig.LibvirtConfigGuest()
        page_merging.keep_pages_apart(guest)
        xml = etree.fromstring(guest.membacking.to_xml())
        self.assertEqual(['nosharepages'], [e.tag for e in xml])

    def test_memory_backing_kept(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.membacking = vconfig.LibvirtConfigGuestMemoryBacking()
        guest.membacking.discard = True
        page_merging.keep_pages_apart(guest)
        xml = etree.fromstring(guest.membacking.to_xml())
        self.assertEqual(['nosharepages', 'discard'], [e.tag for e in xml])
