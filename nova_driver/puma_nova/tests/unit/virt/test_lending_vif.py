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

import ipaddress

from lxml import etree
from nova import test

from puma_nova.virt import lending_vif

UUID = '01234567-89ab-cdef-0123-456789abcdef'


class LendingVifTest(test.NoDBTestCase):

    def test_mac_is_stable_and_local(self):
        mac = lending_vif.mac(UUID)
        self.assertEqual(mac, lending_vif.mac(UUID))
        self.assertNotEqual(mac, lending_vif.mac(UUID[::-1]))
        self.assertTrue(mac.startswith('fa:16:3f:'))
        first = int(mac.split(':')[0], 16)
        self.assertEqual(0x02, first & 0x03)  # local, unicast

    def test_link_local_eui64(self):
        mac = lending_vif.mac(UUID).split(':')
        addr = ipaddress.IPv6Address(lending_vif.address(UUID))
        self.assertTrue(addr.is_link_local)
        # fa:16:3f:AA:BB:CC -> fe80::f816:3fff:feAA:BBCC
        self.assertEqual(
            'fe80:0000:0000:0000:f816:3fff:fe%s:%s%s'
            % (mac[3], mac[4], mac[5]), addr.exploded)

    def test_config(self):
        xml = etree.fromstring(
            lending_vif.config(UUID, 'br-puma').to_xml())
        self.assertEqual('bridge', xml.get('type'))
        self.assertEqual('br-puma', xml.find('source').get('bridge'))
        self.assertEqual('pl-0123456789a', xml.find('target').get('dev'))
        self.assertEqual(lending_vif.mac(UUID),
                         xml.find('mac').get('address'))
        self.assertEqual('virtio', xml.find('model').get('type'))
