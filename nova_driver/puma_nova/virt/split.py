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

"""Split migrations: who may be split, and the libvirt parameters.

A split migration moves an instance to a main host that keeps only part
of its memory resident (``split.main-limit``); the rest is served by a
memory server on a sub host (``split.sub-host-uri``). The patched libvirt
takes both as typed parameters of ``migrateToURI3`` together with the
``VIR_MIGRATE_SPLIT`` flag.
"""

from nova import conf as nova_conf
from nova import exception
from nova.virt import hardware
from oslo_log import log as logging
from oslo_utils import strutils
from oslo_utils import units

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

# The Python bindings of an unpatched libvirt do not know the flag.
VIR_MIGRATE_SPLIT = 1 << 21
# Flags Nova may set ([libvirt] live_migration_permit_post_copy,
# live_migration_parallel_connections) that libvirt refuses together with
# VIR_MIGRATE_SPLIT: the memory servers take the pages post-copy would
# fetch later, and QEMU classifies pages in the one migration thread.
VIR_MIGRATE_POSTCOPY = 1 << 15
VIR_MIGRATE_PARALLEL = 1 << 17
NOT_WITH_SPLIT = VIR_MIGRATE_POSTCOPY | VIR_MIGRATE_PARALLEL
# Nova sets it only where post-copy is not permitted; a split migration,
# which has no post-copy, gets it whenever the operator permits it.
VIR_MIGRATE_AUTO_CONVERGE = 1 << 13
PARAM_PARALLEL_CONNECTIONS = 'parallel.connections'
PARAM_SUB_HOST_URI = 'split.sub-host-uri'
PARAM_MIRROR_URI = 'split.mirror-uri'
PARAM_MAIN_LIMIT = 'split.main-limit'

# QEMU and libvirt migrate a split VM again (docs/split-migration.md),
# but the driver's second hop (the first split's memory server and ledger
# entry handed over on success) has only run against fakelibvirt, never
# against the lab's real stack, so the driver refuses to live-migrate a
# split instance before anything is reserved. The ledger handling of a
# second hop does not depend on it (tests turn it on to check that a
# rolled back second hop keeps the first split).
EXTRA_SPEC = 'puma:split'
# Custom image properties reach the instance as system metadata only.
IMAGE_SYSMETA = 'image_puma_split'
ALLOWED = 'allowed'


def is_allowed(instance):
    """Whether the flavor or the image of the instance allows splitting."""
    flavor_value = instance.flavor.extra_specs.get(EXTRA_SPEC)
    image_value = (instance.system_metadata or {}).get(IMAGE_SYSMETA)
    return ALLOWED in (flavor_value, image_value)


def refusal(instance):
    """Why the instance cannot be split, or None.

    Split memory is one flat range on the sub host: guest NUMA cells,
    huge pages and pinned CPUs would be silently broken by it.
    """
    flavor = instance.flavor
    image_meta = instance.image_meta
    if instance.numa_topology is not None or flavor.extra_specs.get(
            'hw:numa_nodes'):
        return 'instances with a NUMA topology cannot be split'
    if (flavor.extra_specs.get('hw:mem_page_size') or
            image_meta.properties.get('hw_mem_page_size')):
        return 'instances with huge pages cannot be split'
    policy = hardware.get_cpu_policy_constraint(flavor, image_meta)
    if policy in ('dedicated', 'mixed'):
        return 'instances with pinned CPUs cannot be split'
    if strutils.bool_from_string(flavor.extra_specs.get('hw:cpu_realtime')):
        return 'realtime instances cannot be split'
    return None


def config_refusal():
    """Why this host's live migrations cannot be split, or None.

    libvirt refuses a split migration that is tunnelled (QEMU splits only
    a stream that goes to the destination over a socket); Nova would add
    the flag to every live migration and it may not be dropped silently.
    With ``live_migration_with_native_tls`` the memory servers are reached
    over TLS too (libvirt sets QEMU's x-split-tls-creds, the memory
    servers run with ``[puma] memory_server_tls_x509_dir``).
    """
    if CONF.libvirt.live_migration_tunnelled:
        return ('[libvirt] live_migration_tunnelled is set and a tunnelled '
                'migration cannot be split')
    return None


def check_splittable(instance):
    """Raise MigrationPreCheckError unless the instance may be split."""
    if not is_allowed(instance):
        raise exception.MigrationPreCheckError(
            reason='instance %s does not fit in the free memory of the '
                   'destination and its flavor does not allow a split '
                   'migration (%s=%s)' % (instance.uuid, EXTRA_SPEC,
                                          ALLOWED))
    reason = refusal(instance) or config_refusal()
    if reason:
        raise exception.MigrationPreCheckError(
            reason='split migration of %s refused: %s' % (instance.uuid,
                                                          reason))


def migrate_params(plan):
    """The typed migrateToURI3 parameters of a split plan.

    :param plan: dict with 'sub_uri' (str 'tcp:HOST:PORT'), 'main_limit_mb'
        (int) and optionally 'mirror_uri' (str).
    """
    sub_uri = plan.get('sub_uri')
    limit_mb = plan.get('main_limit_mb')
    if not isinstance(sub_uri, str) or not sub_uri.startswith('tcp:'):
        raise ValueError('split plan has no valid sub host URI: %r'
                         % (sub_uri,))
    if (not isinstance(limit_mb, int) or isinstance(limit_mb, bool) or
            limit_mb <= 0):
        raise ValueError('split plan has no valid main limit: %r'
                         % (limit_mb,))
    params = {
        PARAM_SUB_HOST_URI: sub_uri,
        # libvirt-python turns a non-negative int into a ULLONG.
        PARAM_MAIN_LIMIT: limit_mb * units.Mi,
    }
    if plan.get('mirror_uri'):
        params[PARAM_MIRROR_URI] = plan['mirror_uri']
    return params


class SplitDomain(object):
    """A libvirt domain whose migrateToURI3 performs a split migration.

    Nova's Guest.migrate() builds the parameters itself and has no hook
    for extra ones; wrapping the domain adds ours to its call and leaves
    everything else to the real domain. Post-copy and parallel
    connections, which Nova adds when they are configured and libvirt
    refuses with a split, are left out of that migration. Without
    post-copy, a guest that dirties memory faster than the migration
    sends it only converges by throttling: with [libvirt]
    live_migration_permit_auto_converge the migration gets
    auto-converge, also where Nova left it out for post-copy.
    """

    def __init__(self, domain, params):
        self._puma_domain = domain
        self._puma_params = params

    def __getattr__(self, name):
        return getattr(self._puma_domain, name)

    def migrateToURI3(self, dconnuri, params, flags):
        merged = dict(params)
        if flags & NOT_WITH_SPLIT:
            LOG.info('Split migration of %s: without post-copy and '
                     'parallel connections (flags %#x dropped)',
                     self._puma_domain.name(), flags & NOT_WITH_SPLIT)
            merged.pop(PARAM_PARALLEL_CONNECTIONS, None)
        merged.update(self._puma_params)
        flags = (flags & ~NOT_WITH_SPLIT) | VIR_MIGRATE_SPLIT
        if CONF.libvirt.live_migration_permit_auto_converge:
            flags |= VIR_MIGRATE_AUTO_CONVERGE
        LOG.info('Split migration of %s: libvirt migration flags %#x',
                 self._puma_domain.name(), flags)
        return self._puma_domain.migrateToURI3(dconnuri, params=merged,
                                               flags=flags)
