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

"""Exclusive host/guest caching of a server's disks.

A block that a guest reads through the host page cache is held twice:
in the host's page cache and in the guest's own.  With
``puma:exclusive_cache=true`` on its flavor, a server's disks that use the
host page cache (``[libvirt] disk_cachemodes`` of ``writeback``,
``writethrough`` or ``unsafe``) get the patched libvirt's
``<driver exclusive_cache='on'/>``: QEMU drops the host's copy of what
the guest has just read (its ``exclusive-cache`` option of the top image;
the shared base image in ``_base`` keeps the host cache).  Disks with
``cache='none'`` or ``directsync`` bypass the host cache already and are
left as they are.

Volumes get it as well, the ones of the boot and those attached or
swapped in later (``attach_volume``, ``swap_volume``), when their source
is a file or a block device (NFS, iSCSI, FC; not RBD, which QEMU reads
over the network without the host page cache).

The host offers it when its libvirt and QEMU accept the attribute
(:func:`probe`, at ``init_host``), and then reports the trait
``CUSTOM_PUMA_EXCLUSIVE_CACHE``; a flavor can require the trait so that
the scheduler only picks such hosts.
"""

from lxml import etree
from nova import exception
from nova.i18n import _
from nova.virt.libvirt import config as vconfig
from oslo_log import log as logging
from oslo_utils import strutils

from puma_nova.virt import exclusive_cache_probe

LOG = logging.getLogger(__name__)

EXTRA_SPEC = 'puma:exclusive_cache'
TRAIT = 'CUSTOM_PUMA_EXCLUSIVE_CACHE'
ATTRIBUTE = exclusive_cache_probe.ATTRIBUTE

# Source types whose QEMU node is file-posix (file, host_device).
SOURCE_TYPES = ('file', 'block')
# Cache modes with cache.direct=on: no host page cache to drop.
DIRECT_CACHE_MODES = ('none', 'directsync')


class ExclusiveCacheUnsupported(exception.InvalidInput):
    # An InvalidInput aborts the build with this message as the fault of
    # the instance, instead of rescheduling behind a generic one.
    msg_fmt = _("Exclusive caching (%(spec)s) was requested for instance "
                "%(instance)s but host %(host)s cannot provide it: "
                "%(reason)s")


def requested(flavor):
    """Whether FLAVOR asks for exclusive caching of its servers' disks.

    A value that is not a boolean (a flavor made before nova-api
    validated ``puma:`` keys) fails the boot with that reason.
    """
    value = flavor.extra_specs.get(EXTRA_SPEC)
    if value is None:
        return False
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError:
        raise exception.InvalidInput(
            reason='%s=%r is not a boolean' % (EXTRA_SPEC, value))


class LibvirtConfigGuestDiskExclusiveCache(vconfig.LibvirtConfigGuestDisk):
    """A disk whose <driver> has exclusive_cache='on'."""

    def format_dom(self):
        dev = super().format_dom()
        drv = dev.find('driver')
        if drv is None:
            drv = etree.Element('driver', name='qemu')
            dev.insert(0, drv)
        drv.set(ATTRIBUTE, 'on')
        return dev


def applies(disk):
    """Whether DISK (a LibvirtConfigGuestDisk) reads through the host cache.

    Nova sets the cache mode before the guest config is returned; a disk
    without one gets QEMU's default, writeback.
    """
    return (isinstance(disk, vconfig.LibvirtConfigGuestDisk) and
            disk.source_type in SOURCE_TYPES and
            disk.driver_cache not in DIRECT_CACHE_MODES and
            not getattr(disk, 'shareable', False))


def with_exclusive_cache(disk):
    """DISK with exclusive caching if it applies to it, else DISK itself."""
    if not applies(disk) or isinstance(
            disk, LibvirtConfigGuestDiskExclusiveCache):
        return disk
    exclusive = LibvirtConfigGuestDiskExclusiveCache()
    exclusive.__dict__.update(disk.__dict__)
    return exclusive


def apply(guest):
    """Turn exclusive caching on for GUEST's disks it applies to.

    Returns the target devices of those disks (for the log).
    """
    targets = []
    for i, dev in enumerate(guest.devices):
        disk = with_exclusive_cache(dev)
        if disk is not dev:
            guest.devices[i] = disk
            targets.append(dev.target_dev)
    return targets


def probe(conn, virt_type):
    """Whether this libvirt and its QEMU accept exclusive_cache."""
    supported, detail = exclusive_cache_probe.probe(conn, virt_type)
    if not supported:
        LOG.info('Exclusive caching is not available on this host: %s',
                 detail)
    elif detail:
        LOG.warning('Exclusive caching probe: %s', detail)
    return supported
