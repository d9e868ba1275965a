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
from nova import objects
from nova import test
from nova.virt.libvirt import config as vconfig

from puma_nova.virt import shoot4u


class Shoot4UTest(test.NoDBTestCase):

    def test_requested(self):
        self.assertTrue(shoot4u.requested(
            objects.Flavor(extra_specs={'puma:shoot4u': 'true'})))
        self.assertFalse(shoot4u.requested(
            objects.Flavor(extra_specs={'puma:shoot4u': 'false'})))
        self.assertFalse(shoot4u.requested(objects.Flavor(extra_specs={})))

    def _features(self, guest):
        parser = etree.XMLParser(remove_blank_text=True)
        xml = etree.fromstring(guest.to_xml(), parser)
        return [etree.tostring(f).decode() for f in xml.find('features')]

    def test_add_feature(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.virt_type = "kvm"
        guest.add_feature(vconfig.LibvirtConfigGuestFeatureACPI())
        shoot4u.add_feature(guest)
        self.assertEqual(
            ['<acpi/>', '<kvm><pv-tlb-shootdown state="on"/></kvm>'],
            self._features(guest))

    def test_one_kvm_element_with_hidden(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.virt_type = "kvm"
        guest.add_feature(vconfig.LibvirtConfigGuestFeatureKvmHidden())
        shoot4u.add_feature(guest)
        self.assertEqual(
            ['<kvm><hidden state="on"/><pv-tlb-shootdown state="on"/>'
             '</kvm>'], self._features(guest))

    def test_probe(self):
        defined = []

        class Dom(object):
            def undefine(self):
                defined.append('undefined')

        class Conn(object):
            def __init__(self, error=None):
                self.error = error

            def defineXML(self, xml):
                if self.error:
                    raise self.error
                defined.append(xml)
                return Dom()

        self.assertTrue(shoot4u.probe(Conn(), 'kvm'))
        self.assertIn("<pv-tlb-shootdown state='on'/>", defined[0])
        self.assertEqual('undefined', defined[1])
        self.assertFalse(shoot4u.probe(
            Conn(RuntimeError('unsupported KVM feature: pv-tlb-shootdown')),
            'qemu'))
