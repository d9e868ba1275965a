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

"""Where an instance is reached on the cache-lending channel.

The lending interface's MAC is derived from the instance uuid, and its
address is the IPv6 link-local (EUI-64) address the guest configures by
itself from that MAC once the link is up. Compute hosts (which give the
interface) and puma-scheduler (which pairs instances) both derive it from
the uuid alone: no address management, nothing to store.
"""

import hashlib
import ipaddress

# Locally administered, unicast; Neutron uses fa:16:3e.
MAC_PREFIX = (0xfa, 0x16, 0x3f)


def mac(instance_uuid):
    tail = hashlib.sha256(instance_uuid.encode()).digest()[:3]
    return ':'.join('%02x' % b for b in MAC_PREFIX + tuple(tail))


def address(instance_uuid):
    """The IPv6 link-local (EUI-64) address of the lending interface."""
    octets = [int(x, 16) for x in mac(instance_uuid).split(':')]
    octets[0] ^= 0x02
    eui = octets[:3] + [0xff, 0xfe] + octets[3:]
    return str(ipaddress.IPv6Address(bytes([0xfe, 0x80] + [0] * 6 + eui)))
