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

"""Opting a server out of the host's page merging (KSM).

Merged pages are shared between VMs until one writes: the copy-on-write
fault takes measurably longer than a write to a page of one's own, and a
tenant can time it to learn whether another VM on the host holds a page
of known content (a cross-VM deduplication side channel).  A flavor with
``puma:page_merging=false`` gets libvirt's
``<memoryBacking><nosharepages/></memoryBacking>`` (QEMU's
``mem-merge=off``: its RAM is not madvise()d MADV_MERGEABLE) and is
never merged, at the cost of the memory merging would have saved.
"""

from nova import exception
from nova.virt.libvirt import config as vconfig
from oslo_utils import strutils

EXTRA_SPEC = 'puma:page_merging'


def opted_out(flavor):
    """Whether FLAVOR asks that its servers' pages never be merged.

    A value that is not a boolean (a flavor made before nova-api
    validated ``puma:`` keys) fails the boot with that reason rather
    than letting the pages merge.
    """
    value = flavor.extra_specs.get(EXTRA_SPEC)
    if value is None:
        return False
    try:
        return not strutils.bool_from_string(value, strict=True)
    except ValueError:
        raise exception.InvalidInput(
            reason='%s=%r is not a boolean' % (EXTRA_SPEC, value))


def keep_pages_apart(guest):
    """Set <nosharepages/> in GUEST's memory backing (created if none)."""
    if guest.membacking is None:
        guest.membacking = vconfig.LibvirtConfigGuestMemoryBacking()
    guest.membacking.sharedpages = False
