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

"""The lending-channel interface of Puma-enabled instances.

A flavor with ``puma:lending=true`` gets one more virtio interface,
bridged to ``[puma] lending_bridge``, outside Neutron: no tenant network
is needed. Its host side is named ``pl-<uuid prefix>`` (the lending
filter matches on it) and its MAC is derived from the instance uuid, so
its IPv6 link-local address, which the guest configures by itself when
the link is up, is known to the host without any address management.
"""

from nova import exception
from nova.i18n import _
from nova.virt.libvirt import config as vconfig
from oslo_utils import strutils

from puma_nova.compute import lending
from puma_nova import lending_address

EXTRA_SPEC = 'puma:lending'


class LendingChannelUnavailable(exception.InvalidInput):
    msg_fmt = _("The lending channel (%(spec)s) was requested for instance "
                "%(instance)s but host %(host)s does not provide it: "
                "%(reason)s")


def requested(flavor):
    return strutils.bool_from_string(flavor.extra_specs.get(EXTRA_SPEC))


mac = lending_address.mac
address = lending_address.address


def config(instance_uuid, bridge):
    vif = vconfig.LibvirtConfigGuestInterface()
    vif.net_type = 'bridge'
    vif.source_dev = bridge
    vif.target_dev = lending.tap_name(instance_uuid)
    vif.mac_addr = mac(instance_uuid)
    vif.model = 'virtio'
    return vif
