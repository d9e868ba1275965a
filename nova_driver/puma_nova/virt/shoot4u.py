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

"""Shoot4U: paravirtual remote TLB shootdown for Puma instances.

The patched libvirt knows ``<features><kvm><pv-tlb-shootdown
state='on'/></kvm></features>`` and maps it to QEMU's ``kvm-shoot4u``
CPU property. Unpatched libvirt refuses the element while parsing.
"""

from lxml import etree
from nova import exception
from nova.i18n import _
from nova.virt.libvirt import config as vconfig
from oslo_log import log as logging
from oslo_utils import strutils

from puma_nova.virt import shoot4u_probe

LOG = logging.getLogger(__name__)

EXTRA_SPEC = 'puma:shoot4u'
TRAIT = 'CUSTOM_PUMA_SHOOT4U'
ELEMENT = shoot4u_probe.ELEMENT


class Shoot4UUnsupported(exception.InvalidInput):
    # An InvalidInput aborts the build with this message as the fault of
    # the instance, instead of rescheduling behind a generic one.
    msg_fmt = _("Shoot4U (%(spec)s) was requested for instance "
                "%(instance)s but host %(host)s cannot provide it: "
                "%(reason)s")


def requested(flavor):
    return strutils.bool_from_string(flavor.extra_specs.get(EXTRA_SPEC))


class LibvirtConfigGuestFeatureKvm(vconfig.LibvirtConfigGuestFeature):
    """<kvm> with pv-tlb-shootdown, and hidden when Nova wanted it."""

    def __init__(self, hidden=False, **kwargs):
        super().__init__('kvm', **kwargs)
        self.hidden = hidden

    def format_dom(self):
        root = super().format_dom()
        if self.hidden:
            root.append(etree.Element('hidden', state='on'))
        root.append(etree.Element(ELEMENT, state='on'))
        return root


def add_feature(guest):
    """Turn Shoot4U on in a LibvirtConfigGuest, keeping one <kvm>."""
    hidden = False
    kept = []
    for feature in guest.features:
        if feature.root_name == 'kvm':
            hidden = hidden or isinstance(
                feature, vconfig.LibvirtConfigGuestFeatureKvmHidden)
        else:
            kept.append(feature)
    guest.features = kept
    guest.add_feature(LibvirtConfigGuestFeatureKvm(hidden=hidden))


def probe(conn, virt_type):
    """Whether this libvirt accepts the pv-tlb-shootdown KVM feature."""
    supported, detail = shoot4u_probe.probe(conn, virt_type)
    if not supported:
        LOG.info('Shoot4U is not available on this host: %s', detail)
    elif detail:
        LOG.warning('Shoot4U probe: %s', detail)
    return supported
