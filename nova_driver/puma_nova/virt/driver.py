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

"""PumaLibvirtDriver: Nova's libvirt driver with Puma's additions.

Loaded with ``[DEFAULT] compute_driver = puma.PumaLibvirtDriver`` (see
docs/nova.md). On top of the libvirt driver it

* turns a live migration of an instance that does not fit in the
  destination's free RAM into a split migration (flavor extra spec
  ``puma:split=allowed``), planned with the Puma scheduler, with the
  memory server started on the sub host and the split parameters added
  to ``migrateToURI3`` on the source;
* applies the lending ledger to this host's MEMORY_MB inventory;
* turns on Shoot4U for flavors with ``puma:shoot4u=true``, and exclusive
  host/guest caching of the disks for ``puma:exclusive_cache=true``.

Everything else Puma does on a compute host (memory servers, statistics,
lending pairs, the ``puma-compute`` RPC endpoint) is
puma-compute-agent's, a service of its own (compute.agent).
"""

import contextlib
import threading
import traceback

from nova.compute import power_state
from nova.compute import task_states
import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import rpc as nova_rpc
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import guest as libvirt_guest
import os_resource_classes as orc
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import excutils

from puma_nova.compute import rpcapi as compute_rpcapi
from puma_nova.compute import split_plans
from puma_nova.conf import compute as puma_conf
from puma_nova.scheduler import rpcapi as scheduler_rpcapi
from puma_nova.virt import exclusive_cache
from puma_nova.virt import ledger
from puma_nova.virt import lending_vif
from puma_nova.virt import libvirt_events
from puma_nova.virt import libvirt_host
from puma_nova.virt import page_merging
from puma_nova.virt import shoot4u
from puma_nova.virt import split

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
puma_conf.register_opts(CONF)

SPLIT_TRAIT = 'CUSTOM_PUMA_SPLIT'
# Task states in which destroy() means the instance leaves this host.
_LEAVING_STATES = (task_states.DELETING, task_states.SOFT_DELETING,
                   task_states.SHELVING_OFFLOADING)


class PumaLibvirtDriver(libvirt_driver.LibvirtDriver):

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        libvirt_host.reentrant_connection_lock(self._host)
        libvirt_events.dispatch_lifecycle_events(self._host)
        self._puma_host = CONF.host
        self._puma_scheduler_api = None
        self._puma_compute_api = None
        self._puma_ledger = ledger.LedgerCache(
            self._puma_fetch_ledger, CONF.puma.ledger_cache_seconds)
        self._puma_reserved = ledger.ReservedKeeper()
        # Split plans this host made as a destination (a file shared with
        # puma-compute-agent, which serves them to the sources).
        self._puma_plans = split_plans.SplitPlans(
            split_plans.path(CONF.instances_path), CONF.host)
        self._puma_lock = threading.Lock()
        # As a source: split plans fetched before the migration starts,
        # by instance uuid, and whether this thread monitors a split.
        self._puma_source_plans = {}
        # Instances whose migration an operator aborted (uuids).
        self._puma_aborted = set()
        self._puma_local = threading.local()
        self._puma_shoot4u = False
        self._puma_exclusive_cache = False

    # Life cycle -----------------------------------------------------
    #
    # The compute side of Puma (memory servers, statistics, lending
    # pairs, the puma-compute endpoint) is puma-compute-agent's
    # (compute.agent); the driver only probes what it needs to build
    # guests and hooks Nova's migration flow.

    def init_host(self, host):
        super().init_host(host)
        self._puma_host = host
        self._puma_plans = split_plans.SplitPlans(
            split_plans.path(CONF.instances_path), host)
        self._puma_shoot4u = (
            CONF.puma.shoot4u_allowed and
            CONF.libvirt.virt_type in ('qemu', 'kvm') and
            shoot4u.probe(self._host.get_connection(),
                          CONF.libvirt.virt_type))
        self._puma_exclusive_cache = (
            CONF.libvirt.virt_type in ('qemu', 'kvm') and
            exclusive_cache.probe(self._host.get_connection(),
                                  CONF.libvirt.virt_type))
        LOG.info('Puma: driver on %s (Shoot4U %s, exclusive caching %s, '
                 'split %s)', host,
                 'available' if self._puma_shoot4u else 'unavailable',
                 'available' if self._puma_exclusive_cache else 'unavailable',
                 'allowed' if CONF.puma.split_allowed else 'disabled')

    # Both clients use Nova's transport, which Nova sets up only after it
    # loaded the driver.

    @property
    def _puma_scheduler(self):
        if self._puma_scheduler_api is None:
            self._puma_scheduler_api = scheduler_rpcapi.SchedulerAPI(
                nova_rpc.TRANSPORT, timeout=CONF.puma.rpc_timeout)
        return self._puma_scheduler_api

    @property
    def _puma_compute(self):
        if self._puma_compute_api is None:
            self._puma_compute_api = compute_rpcapi.ComputeAPI(
                nova_rpc.TRANSPORT, timeout=CONF.puma.rpc_timeout)
        return self._puma_compute_api

    # Placement -------------------------------------------------------

    def _puma_fetch_ledger(self, host):
        return self._puma_scheduler.get_ledger(
            nova_context.get_admin_context(), host,
            timeout=min(5, CONF.puma.rpc_timeout))

    def get_available_resource(self, nodename):
        # The resource tracker calls this before it takes its lock to
        # update the provider tree: read the ledger here, never under
        # that lock.
        self._puma_ledger.refresh(self._puma_host)
        return super().get_available_resource(nodename)

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        # What placement has, as Nova's report client last read it.
        current = provider_tree.data(nodename).inventory.get(
            orc.MEMORY_MB, {}).get('reserved')
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        # Runs under the resource tracker's lock: the last ledger read,
        # no RPC (see get_available_resource).
        serial = self._puma_ledger.serial
        entries = self._puma_ledger.get(self._puma_host)
        borrowed, lent = ledger.totals(entries, self._puma_host)
        inventory = provider_tree.data(nodename).inventory
        applied = ledger.apply(inventory, borrowed, lent)
        memory = applied.get(orc.MEMORY_MB)
        if memory is not None:
            # The Puma scheduler writes the lent part when it plans and
            # releases: never undo it with an older ledger read.
            memory['reserved'] = min(memory['total'],
                                     self._puma_reserved.reserved(
                                         current, memory['reserved'],
                                         serial))
        if applied != inventory:
            LOG.debug('Puma ledger on %s: %d MiB borrowed, %d MiB lent',
                      nodename, borrowed, lent)
            provider_tree.update_inventory(nodename, applied)
        traits = set(provider_tree.data(nodename).traits)
        traits -= {shoot4u.TRAIT, exclusive_cache.TRAIT, SPLIT_TRAIT}
        if self._puma_shoot4u:
            traits.add(shoot4u.TRAIT)
        if self._puma_exclusive_cache:
            traits.add(exclusive_cache.TRAIT)
        if CONF.puma.split_allowed:
            traits.add(SPLIT_TRAIT)
        provider_tree.update_traits(nodename, traits)

    # Shoot4U ---------------------------------------------------------

    def _set_features(self, guest, os_type, image_meta, flavor):
        super()._set_features(guest, os_type, image_meta, flavor)
        if not shoot4u.requested(flavor):
            return
        if not self._puma_shoot4u:
            raise shoot4u.Shoot4UUnsupported(
                spec=shoot4u.EXTRA_SPEC, instance=guest.uuid,
                host=self._puma_host, reason=self._puma_shoot4u_reason())
        shoot4u.add_feature(guest)

    def _puma_shoot4u_reason(self):
        if not CONF.puma.shoot4u_allowed:
            return '[puma] shoot4u_allowed is false'
        if CONF.libvirt.virt_type not in ('qemu', 'kvm'):
            return 'virt_type %s has no KVM features' % CONF.libvirt.virt_type
        return "libvirt does not know <kvm><%s/>" % shoot4u.ELEMENT

    # Lending channel, page merging ----------------------------------

    def _get_guest_config(self, instance, *args, **kwargs):
        guest = super()._get_guest_config(instance, *args, **kwargs)
        if page_merging.opted_out(instance.flavor):
            page_merging.keep_pages_apart(guest)
        if exclusive_cache.requested(instance.flavor):
            if not self._puma_exclusive_cache:
                raise exclusive_cache.ExclusiveCacheUnsupported(
                    spec=exclusive_cache.EXTRA_SPEC, instance=instance.uuid,
                    host=self._puma_host,
                    reason=self._puma_exclusive_cache_reason())
            LOG.debug('Exclusive caching on disks %s',
                      exclusive_cache.apply(guest), instance=instance)
        if lending_vif.requested(instance.flavor):
            if not CONF.puma.lending_channel_enabled:
                raise lending_vif.LendingChannelUnavailable(
                    spec=lending_vif.EXTRA_SPEC, instance=instance.uuid,
                    host=self._puma_host,
                    reason='[puma] lending_channel_enabled is false')
            guest.add_device(lending_vif.config(instance.uuid,
                                                CONF.puma.lending_bridge))
        return guest

    # Volumes attached, swapped in or live-migrated get the caching of
    # the boot's disks.

    def attach_volume(self, context, connection_info, instance, mountpoint,
                      disk_bus=None, device_type=None, encryption=None):
        with self._puma_volume_instance(instance):
            return super().attach_volume(
                context, connection_info, instance, mountpoint,
                disk_bus=disk_bus, device_type=device_type,
                encryption=encryption)

    def swap_volume(self, context, old_connection_info,
                    new_connection_info, instance, mountpoint, resize_to):
        with self._puma_volume_instance(instance):
            return super().swap_volume(
                context, old_connection_info, new_connection_info,
                instance, mountpoint, resize_to)

    @contextlib.contextmanager
    def _puma_volume_instance(self, instance):
        """The volume configs made in this block are INSTANCE's."""
        self._puma_local.volume_instance = instance
        try:
            yield
        finally:
            self._puma_local.volume_instance = None

    def _get_volume_config(self, connection_info, disk_info):
        conf = super()._get_volume_config(connection_info, disk_info)
        # Boot and rebuild configs are handled with the whole guest's in
        # _get_guest_config; here those of attach_volume, swap_volume and
        # the destination XML of a live migration.
        instance = getattr(self._puma_local, 'volume_instance', None)
        if instance is None or not exclusive_cache.requested(
                instance.flavor):
            return conf
        if not self._puma_exclusive_cache:
            LOG.warning('Puma: the volume at %s is attached without the '
                        'exclusive caching (%s) of its instance: %s',
                        disk_info.get('dev'), exclusive_cache.EXTRA_SPEC,
                        self._puma_exclusive_cache_reason(),
                        instance=instance)
            return conf
        return exclusive_cache.with_exclusive_cache(conf)

    def _puma_exclusive_cache_reason(self):
        if CONF.libvirt.virt_type not in ('qemu', 'kvm'):
            return 'virt_type %s has no QEMU disks' % CONF.libvirt.virt_type
        return ("libvirt or QEMU does not know <driver %s='on'/>"
                % exclusive_cache.ATTRIBUTE)

    # Split migration: destination side -------------------------------

    def check_can_live_migrate_destination(self, context, instance,
                                           src_compute_info,
                                           dst_compute_info,
                                           block_migration=False,
                                           disk_over_commit=False):
        if shoot4u.requested(instance.flavor) and not self._puma_shoot4u:
            raise exception.MigrationPreCheckError(
                reason='instance %s uses Shoot4U (%s) but host %s cannot '
                       'provide it: %s' % (instance.uuid,
                                           shoot4u.EXTRA_SPEC,
                                           self._puma_host,
                                           self._puma_shoot4u_reason()))
        if (exclusive_cache.requested(instance.flavor) and
                not self._puma_exclusive_cache):
            raise exception.MigrationPreCheckError(
                reason='instance %s uses exclusive caching (%s) but host %s '
                       'cannot provide it: %s' % (
                           instance.uuid, exclusive_cache.EXTRA_SPEC,
                           self._puma_host,
                           self._puma_exclusive_cache_reason()))
        # A split may have been planned before Nova asked this host
        # (puma-api plans, then asks Nova): any failure of the checks
        # until check_source_migrate_data_at_dest gives it back. Nova
        # calls cleanup_live_migration_destination_check after the
        # checks, failed or not, in the same thread.
        self._puma_local.checking = (instance.uuid
                                     if split.is_allowed(instance)
                                     else None)
        try:
            return super().check_can_live_migrate_destination(
                context, instance, src_compute_info, dst_compute_info,
                block_migration, disk_over_commit)
        except Exception:
            with excutils.save_and_reraise_exception():
                self._puma_release_unchecked(context)

    def cleanup_live_migration_destination_check(self, context,
                                                 dest_check_data):
        try:
            super().cleanup_live_migration_destination_check(
                context, dest_check_data)
        finally:
            self._puma_release_unchecked(context)

    def _puma_release_unchecked(self, context):
        """Release a plan whose destination checks did not complete."""
        instance_uuid = getattr(self._puma_local, 'checking', None)
        self._puma_local.checking = None
        if instance_uuid:
            LOG.info('Puma: the live-migration checks of %s on %s failed; '
                     'releasing any split planned for it here',
                     instance_uuid, self._puma_host)
            self._puma_release_main(context, instance_uuid,
                                    self._puma_host)

    def _puma_split_entry(self, instance):
        """The split the instance runs with here, or None.

        Reads this host's ledger (the last one read if the scheduler is
        away): a running or done split whose main host is this one.
        """
        if not split.is_allowed(instance):
            return None
        for e in self._puma_ledger.refresh(self._puma_host):
            if (e.get('instance_uuid') == instance.uuid and
                    e.get('main_host') == self._puma_host and
                    e.get('state') in ('running', 'done')):
                return e
        return None

    def check_source_migrate_data_at_dest(self, ctxt, instance,
                                          migrate_data, migration, limits,
                                          allocs):
        migrate_data = super().check_source_migrate_data_at_dest(
            ctxt, instance, migrate_data, migration, limits, allocs)
        try:
            self._puma_plan_if_needed(ctxt, instance, migration)
        finally:
            # Planned, or refused and released: the checks are over.
            self._puma_local.checking = None
        return migrate_data

    def _puma_free_mb(self):
        return (self._host.get_memory_mb_total() -
                self._host.get_memory_mb_used() -
                CONF.puma.free_ram_margin_mb)

    def _puma_plan_if_needed(self, ctxt, instance, migration):
        # A plan (a file) only ever exists for an instance that may split.
        if split.is_allowed(instance):
            self._puma_plans.pop(instance.uuid)
        need = instance.flavor.memory_mb
        free = self._puma_free_mb()
        if need <= free:
            if split.is_allowed(instance):
                # It moves whole: a split planned before Nova asked this
                # host (puma-api) is not needed; give it back.
                self._puma_release_main(ctxt, instance.uuid,
                                        self._puma_host)
            return None
        if not split.is_allowed(instance):
            # Nova's own behaviour: placement already accepted it.
            LOG.debug('Instance needs %d MiB, %d MiB free here; it does '
                      'not allow splitting', need, free, instance=instance)
            return None
        LOG.info('Instance needs %d MiB, %d MiB free here: split migration',
                 need, free, instance=instance)
        split.check_splittable(instance)
        if not CONF.puma.split_allowed:
            raise exception.MigrationPreCheckError(
                reason='instance %s does not fit in the free memory of %s '
                       'and this host does not take part in split '
                       'migrations' % (instance.uuid, self._puma_host))
        if free <= 0:
            raise exception.MigrationPreCheckError(
                reason='host %s has no free memory for a split migration '
                       'of %s' % (self._puma_host, instance.uuid))
        try:
            current = [e for e in self._puma_instance_entries(
                ctxt, instance.uuid, instance.host)
                if e.get('main_host') != self._puma_host and
                e.get('state') in ledger.HOLDING_STATES]
        except Exception as e:
            raise exception.MigrationPreCheckError(
                reason='Puma scheduler unreachable, cannot plan a split '
                       'migration of %s: %s' % (instance.uuid, e))
        plan = self._puma_request_plan(
            ctxt, instance, need, free,
            busy_sub_hosts={e.get('sub_host') for e in current})
        try:
            answer = self._puma_compute.start_memory_server(
                ctxt, plan['sub_host'], instance.uuid, plan['remote_mb'],
                clients=self._puma_split_clients(instance))
            plan['sub_uri'] = answer['uri']
            split.migrate_params(plan)
        except Exception as e:
            self._puma_release(ctxt, instance.uuid, self._puma_host,
                               plan['sub_host'])
            raise exception.MigrationPreCheckError(
                reason='memory server for %s on sub host %s not started: '
                       '%s' % (instance.uuid, plan['sub_host'], e))
        plan['migration_uuid'] = migration.uuid if migration else None
        try:
            self._puma_plans.keep(plan)
        except Exception as e:
            self._puma_release(ctxt, instance.uuid, self._puma_host,
                               plan['sub_host'])
            raise exception.MigrationPreCheckError(
                reason='split plan of %s not kept on %s: %s'
                       % (instance.uuid, self._puma_host, e))
        self._puma_ledger.invalidate()
        LOG.info('Split migration planned: %(main)d MiB resident here, '
                 '%(remote)d MiB on %(sub)s (%(uri)s)',
                 {'main': plan['main_limit_mb'], 'remote': plan['remote_mb'],
                  'sub': plan['sub_host'], 'uri': plan['sub_uri']},
                 instance=instance)
        return plan

    def _puma_split_clients(self, instance):
        """The hosts that reach the memory server of a split migration.

        The source puts pages during the migration, this host (the main
        host) fetches and puts them afterwards.
        """
        return sorted({instance.host, self._puma_host} - {None})

    def _puma_request_plan(self, ctxt, instance, need, free,
                           busy_sub_hosts=()):
        """Ask the scheduler for a split plan with this host as main host.

        :param busy_sub_hosts: hosts that still serve a split of the
            instance (its memory server there is in use).
        """
        try:
            # Nova checks this host now: a plan of the instance with
            # another main host was left by an attempt Nova gave up
            # after that host's checks (supersede, scheduler API 1.3).
            answer = self._puma_scheduler.plan_split(
                ctxt, instance.uuid, need, self._puma_host,
                instance.project_id, supersede=True,
                source_host=instance.host)
        except messaging.MessagingTimeout as e:
            # The scheduler may have recorded the plan all the same.
            self._puma_release(ctxt, instance.uuid, self._puma_host, None)
            raise exception.MigrationPreCheckError(
                reason='Puma scheduler unreachable, cannot plan a split '
                       'migration of %s: %s' % (instance.uuid, e))
        except Exception as e:
            # The scheduler's PlanError, as a RemoteError or re-raised.
            raise exception.MigrationPreCheckError(
                reason='no sub host for a split migration of %s to %s: %s'
                       % (instance.uuid, self._puma_host,
                          getattr(e, 'value', None) or e))
        if not isinstance(answer, dict):
            answer = {}
        plan = {
            'instance_uuid': instance.uuid,
            'main_host': self._puma_host,
            'sub_host': answer.get('sub_host'),
            'main_limit_mb': answer.get('main_limit_mb'),
            'remote_mb': answer.get('remote_mb'),
            'memory_mb': need,
        }
        problem = None
        if (not isinstance(plan['sub_host'], str) or not plan['sub_host'] or
                plan['sub_host'] == self._puma_host):
            problem = 'bad sub host %r' % (plan['sub_host'],)
        elif plan['sub_host'] in busy_sub_hosts:
            problem = ('sub host %s still serves the current split'
                       % plan['sub_host'])
        elif not all(isinstance(plan[k], int) and plan[k] > 0
                     for k in ('main_limit_mb', 'remote_mb')):
            problem = 'bad sizes %r' % (answer,)
        elif plan['main_limit_mb'] + plan['remote_mb'] < need:
            problem = ('%d + %d MiB do not hold the %d MiB of the instance'
                       % (plan['main_limit_mb'], plan['remote_mb'], need))
        elif plan['main_limit_mb'] > free:
            problem = ('resident limit %d MiB exceeds the %d MiB free here'
                       % (plan['main_limit_mb'], free))
        if problem:
            # Only the plan's entry: the memory server on a busy sub host
            # belongs to the current split.
            self._puma_release(ctxt, instance.uuid, self._puma_host, None)
            raise exception.MigrationPreCheckError(
                reason='unusable split plan for %s: %s'
                       % (instance.uuid, problem))
        return plan

    def pre_live_migration(self, context, instance, block_device_info,
                           network_info, disk_info, migrate_data):
        try:
            migrate_data = super().pre_live_migration(
                context, instance, block_device_info, network_info,
                disk_info, migrate_data)
            self._puma_pre_live_migration(context, instance)
        except Exception:
            # Nova rolls a failed pre_live_migration back without
            # rollback_live_migration_at_source, and without our
            # rollback_live_migration_at_destination when the instance
            # path is shared: release here.
            with excutils.save_and_reraise_exception():
                if split.is_allowed(instance):
                    self._puma_release_main(context, instance.uuid,
                                            self._puma_host, state='failed')
        return migrate_data

    def _puma_pre_live_migration(self, context, instance):
        if not split.is_allowed(instance):
            return
        plan = self._puma_plans.get(instance.uuid)
        if plan is None:
            self._puma_check_no_lost_plan(context, instance.uuid,
                                          self._puma_host)
        if plan:
            # The sub host may have restarted since the check; starting is
            # idempotent and returns the URI of the running server.
            answer = self._puma_compute.start_memory_server(
                context, plan['sub_host'], instance.uuid, plan['remote_mb'],
                clients=self._puma_split_clients(instance))
            if answer['uri'] != plan['sub_uri']:
                self._puma_plans.update(instance.uuid,
                                        sub_uri=answer['uri'])

    def post_live_migration_at_destination(self, context, instance,
                                           network_info,
                                           block_migration=False,
                                           block_device_info=None):
        super().post_live_migration_at_destination(
            context, instance, network_info, block_migration,
            block_device_info)
        plan = (self._puma_plans.pop(instance.uuid)
                if split.is_allowed(instance) else None)
        if plan or self._puma_runs_split_here(context, instance):
            self._puma_set_state(context, instance.uuid, 'done')
            self._puma_ledger.invalidate()

    def _puma_runs_split_here(self, context, instance):
        """Whether the ledger has the instance running split to here.

        The plan this host kept since its checks is gone when its file
        of plans was lost (unreadable, or another instances path after a
        restart); the source migrated with the plan all the same, and the
        split must be recorded.
        """
        if not split.is_allowed(instance):
            return False
        try:
            entries = self._puma_instance_entries(context, instance.uuid,
                                                  self._puma_host)
        except Exception as e:
            LOG.warning('Puma: cannot read the ledger to finish the split '
                        'migration of %s: %s', instance.uuid, e)
            return False
        running = [e for e in entries
                   if e.get('main_host') == self._puma_host and
                   e.get('state') == 'running']
        if running:
            LOG.info('Puma: finishing a split migration whose plan this '
                     'host lost: sub host %s',
                     running[0].get('sub_host'), instance=instance)
        return bool(running)

    def rollback_live_migration_at_destination(self, context, instance,
                                               network_info,
                                               block_device_info,
                                               destroy_disks=True,
                                               migrate_data=None):
        try:
            super().rollback_live_migration_at_destination(
                context, instance, network_info, block_device_info,
                destroy_disks=destroy_disks, migrate_data=migrate_data)
        finally:
            plan = self._puma_plans.get(instance.uuid)
            if plan:
                self._puma_set_state(context, instance.uuid, 'failed')
                self._puma_release(context, instance.uuid,
                                   plan['main_host'], plan['sub_host'])

    def _puma_check_no_lost_plan(self, ctxt, instance_uuid, main_host):
        """Fail if the ledger has a planned split the main host lost.

        A destination whose file of plans was lost (split_plans) no longer
        has the plan; the instance must then not be migrated whole to a
        host it does not fit on. The failure rolls the migration back and
        releases.
        """
        entries = [e for e in self._puma_instance_entries(
            ctxt, instance_uuid, main_host)
            if e.get('main_host') == main_host and
            e.get('state') == 'planned']
        if entries:
            raise exception.MigrationError(
                reason='the split plan of %s on %s was lost; not migrating '
                       'it whole'
                       % (instance_uuid, main_host))

    # Split migration: source side ------------------------------------

    def _puma_get_source_plan(self, context, instance, dest, migrate_data):
        migration = getattr(migrate_data, 'migration', None)
        migration_uuid = migration.uuid if migration else None
        return self._puma_compute.get_split_plan(
            context, dest, instance.uuid, migration_uuid)

    def _live_migration(self, context, instance, dest, post_method,
                        recover_method, block_migration, migrate_data):
        # Nova's migration monitor runs in this thread and decides once,
        # at its start, whether post-copy is on; the migration itself
        # runs in another thread. Fetch the plan first so that the
        # monitor knows a split migration has no post-copy (a failure
        # here is left to _live_migration_operation, as before).
        plan = None
        if split.is_allowed(instance):
            try:
                plan = self._puma_get_source_plan(context, instance, dest,
                                                  migrate_data)
            except Exception as e:
                LOG.debug('Puma: split plan not fetched before the '
                          'migration: %s', e, instance=instance)
            else:
                with self._puma_lock:
                    self._puma_source_plans[instance.uuid] = plan
        self._puma_local.split = bool(plan)
        rolled_back = []
        posted = []

        def recover(*args, **kwargs):
            rolled_back.append(True)
            if (len(args) < 5 and 'migration_status' not in kwargs and
                    self._puma_take_abort(instance)):
                kwargs['migration_status'] = 'cancelled'
            return recover_method(*args, **kwargs)

        def post(*args, **kwargs):
            posted.append(True)
            return post_method(*args, **kwargs)

        try:
            return super()._live_migration(
                context, instance, dest, post, recover,
                block_migration, migrate_data)
        except Exception as e:
            if not rolled_back and not posted and self._puma_left_here(
                    instance):
                # Nova's monitor failed (e.g. its progress save lost the
                # conductor's reply while RabbitMQ restarted) after
                # libvirt completed the migration: the domain was
                # undefined here, Nova's abort came too late, and the
                # instance would be put in ERROR here while it runs on
                # the destination.  Finish the migration as the monitor
                # does when it sees the job completed.
                LOG.warning('Monitoring the live migration to %(dest)s '
                            'failed after it completed (%(err)s); the '
                            'domain left this host: finishing the '
                            'migration', {'dest': dest, 'err': e},
                            instance=instance)
                post_method(context, instance, dest, block_migration,
                            migrate_data)
                return None
            # Nova's monitor saw the job fail (or be cancelled) and rolled
            # the migration back: the instance is ACTIVE here again and
            # the migration 'failed' (or 'cancelled').  Nova 34 then
            # raises the migration thread's error as well, and the compute
            # manager would put the instance in ERROR though it runs here
            # intact.  Keep the error as a failed event of the action.
            # A failed post-copy leaves the source paused: not ours to
            # hide.
            if not rolled_back or not self._puma_runs_here(instance):
                raise
            LOG.warning('Live migration to %(dest)s failed and was rolled '
                        'back; the instance runs here: %(err)s',
                        {'dest': dest, 'err': e}, instance=instance)
            self._puma_record_failure(context, instance, dest, e)
        finally:
            self._puma_local.split = False
            with self._puma_lock:
                self._puma_source_plans.pop(instance.uuid, None)
                self._puma_aborted.discard(instance.uuid)

    def live_migration_abort(self, instance):
        """Abort the migration job, and remember that it was aborted.

        Nova's monitor learns that a job was cancelled from libvirt's
        statistics of the running job (VIR_DOMAIN_JOB_CANCELLED).  Once
        libvirt has ended the job they say VIR_DOMAIN_JOB_NONE, and the
        monitor, finding the domain still active here, takes the job for
        failed: an aborted migration became 'failed' whenever the job
        ended between two of the monitor's polls (lab cloud CI of
        2026-12-02).  The rollback then says 'cancelled' when the job
        this call aborted ended with the domain running here.
        """
        # An Instance, or the dict that Nova's own tests pass.
        uuid = instance['uuid']
        with self._puma_lock:
            self._puma_aborted.add(uuid)
        try:
            super().live_migration_abort(instance)
        except Exception:
            with self._puma_lock:
                self._puma_aborted.discard(uuid)
            raise

    def _puma_take_abort(self, instance):
        """Whether an abort of INSTANCE's migration ended it here."""
        with self._puma_lock:
            if instance['uuid'] not in self._puma_aborted:
                return False
            self._puma_aborted.discard(instance['uuid'])
        return self._puma_runs_here(instance)

    def _puma_left_here(self, instance):
        """Whether the instance's domain is no longer defined here.

        Nova's live migrations undefine the source's domain
        (VIR_MIGRATE_UNDEFINE_SOURCE), which libvirt does only once the
        destination confirmed the migration; a domain that failed or
        stopped stays defined.
        """
        try:
            self._host.get_guest(instance)
        except exception.InstanceNotFound:
            return True
        except Exception:
            return False
        return False

    def _puma_runs_here(self, instance):
        """Whether the instance runs here, not paused.

        A migration whose job failed after the switchover (post-copy)
        leaves the source paused: that one is Nova's error state.
        """
        try:
            return (self._host.get_guest(instance).get_power_state(
                self._host) == power_state.RUNNING)
        except Exception:
            return False

    def _puma_record_failure(self, context, instance, dest, error):
        """A failed 'puma_live_migration' event of the action.

        Its details (shown to the server's owner) say what happened; its
        traceback (shown to admins) ends with ERROR's message, e.g.
        libvirt's, which may name hosts and addresses.
        """
        event = 'puma_live_migration'
        clear = exception.MigrationError(
            reason='the live migration to %s failed and was rolled back; '
                   'the instance runs on %s' % (dest, CONF.host))
        try:
            objects.InstanceActionEvent.event_start(
                context, instance.uuid, event, want_result=False,
                host=CONF.host)
            objects.InstanceActionEvent.event_finish_with_failure(
                context, instance.uuid, event, exc_val=clear,
                exc_tb=''.join(traceback.format_exception(error)),
                want_result=False)
        except Exception as e:
            LOG.warning('Puma: could not record the failed migration in '
                        'the instance actions: %s', e, instance=instance)

    def _puma_start_split(self, ctxt, instance_uuid, dest):
        """Record the split as running; fail if its plan is gone.

        The scheduler expires plans whose migration did not start in
        time and an operator may release them; the memory server is then
        stopped, and migrating split would fail in libvirt or worse.
        An unreachable scheduler does not stop the migration.
        """
        try:
            self._puma_scheduler.split_state(ctxt, instance_uuid, 'running')
        except Exception as e:
            name = getattr(e, 'exc_type', None) or type(e).__name__
            if name in ('LedgerNotFound', 'InvalidTransition'):
                raise exception.MigrationError(
                    reason='the split plan of %s on %s is no longer in the '
                           'ledger (expired or released): %s'
                           % (instance_uuid, dest,
                              getattr(e, 'value', None) or e))
            LOG.warning('Puma: could not set split state of %s to running: '
                        '%s', instance_uuid, e)

    def _is_post_copy_enabled(self, migration_flags):
        # A split migration never runs post-copy (see split.SplitDomain):
        # the monitor must pause it on force-complete and never try to
        # switch it.
        if getattr(self._puma_local, 'split', False):
            return False
        return super()._is_post_copy_enabled(migration_flags)

    def _live_migration_operation(self, context, instance, dest,
                                  block_migration, migrate_data, guest,
                                  device_names):
        plan = None
        if split.is_allowed(instance):
            with self._puma_lock:
                fetched = instance.uuid in self._puma_source_plans
                plan = self._puma_source_plans.pop(instance.uuid, None)
            if not fetched:
                plan = self._puma_get_source_plan(context, instance, dest,
                                                  migrate_data)
            if plan is None:
                self._puma_check_no_lost_plan(context, instance.uuid, dest)
        if plan:
            params = split.migrate_params(plan)
            LOG.info('Split migration to %(dest)s: %(limit)d MiB resident, '
                     'the rest from %(uri)s',
                     {'dest': dest, 'limit': plan['main_limit_mb'],
                      'uri': plan['sub_uri']}, instance=instance)
            self._puma_start_split(context, instance.uuid, dest)
            guest = libvirt_guest.Guest(
                split.SplitDomain(guest._domain, params))
        # Nova rewrites the volumes' <disk> for the destination from
        # _get_volume_config: they keep their exclusive caching.
        with self._puma_volume_instance(instance):
            return super()._live_migration_operation(
                context, instance, dest, block_migration, migrate_data,
                guest, device_names)

    def rollback_live_migration_at_source(self, context, instance,
                                          migrate_data):
        super().rollback_live_migration_at_source(context, instance,
                                                  migrate_data)
        # The destination releases its plan in its own rollback, which
        # Nova skips with a shared instance path: release from here too
        # (idempotent).
        migration = getattr(migrate_data, 'migration', None) \
            if migrate_data and 'migration' in migrate_data else None
        if migration is not None and split.is_allowed(instance):
            dest = migration.dest_compute
            self._puma_release_main(context, instance.uuid, dest,
                                    state='failed')
            try:
                self._puma_compute.drop_split_plan(context, dest,
                                                   instance.uuid)
            except Exception as e:
                LOG.warning('Puma: %s may keep a stale split plan of %s: '
                            '%s', dest, instance.uuid, e)

    def post_live_migration_at_source(self, context, instance, network_info):
        super().post_live_migration_at_source(context, instance,
                                              network_info)
        # The instance left: a split whose main host was here is over.
        if split.is_allowed(instance):
            self._puma_release_main(context, instance.uuid, self._puma_host)

    # Leaving this host otherwise ------------------------------------

    def destroy(self, context, instance, network_info, *args, **kwargs):
        # Nova's arguments as they came: callers pass them either way.
        super().destroy(context, instance, network_info, *args, **kwargs)
        # Never a lazy load here: a destroy that cleans up after a failure
        # may get an instance without its task state.
        if (instance.obj_attr_is_set('task_state') and
                instance.task_state in _LEAVING_STATES and
                split.is_allowed(instance)):
            self._puma_release_main(context, instance.uuid, self._puma_host)

    def migrate_disk_and_power_off(self, context, instance, dest, flavor,
                                   network_info, block_device_info=None,
                                   timeout=0, retry_interval=0):
        disk_info = super().migrate_disk_and_power_off(
            context, instance, dest, flavor, network_info,
            block_device_info=block_device_info, timeout=timeout,
            retry_interval=retry_interval)
        # A cold migration restarts the instance whole on the new host.
        if split.is_allowed(instance):
            self._puma_release_main(context, instance.uuid, self._puma_host)
        return disk_info

    # Life cycle of a split instance (docs/nova-compute.md) ----------
    #
    # A split lives only in the QEMU that a split migration started: any
    # new QEMU has all of the guest's memory local. Once QEMU has stopped
    # or runs anew, the split is given back ("drained back"); a failed
    # event keeps it. A suspend, which QEMU refuses for a split guest,
    # is refused before libvirt.

    def _puma_drain_back(self, context, instance, main_host=None):
        if split.is_allowed(instance):
            self._puma_release_main(context or
                                    nova_context.get_admin_context(),
                                    instance.uuid,
                                    main_host or self._puma_host)

    def reboot(self, context, instance, network_info, reboot_type,
               block_device_info=None, bad_volumes_callback=None,
               accel_info=None, share_info=None):
        # Soft or hard: libvirt starts a new QEMU.
        ret = super().reboot(context, instance, network_info, reboot_type,
                             block_device_info=block_device_info,
                             bad_volumes_callback=bad_volumes_callback,
                             accel_info=accel_info, share_info=share_info)
        self._puma_drain_back(context, instance)
        return ret

    def power_off(self, instance, timeout=0, retry_interval=0):
        # Also the first step of a rebuild, a shelve and a resize.
        super().power_off(instance, timeout=timeout,
                          retry_interval=retry_interval)
        self._puma_drain_back(None, instance)

    def power_on(self, context, instance, network_info,
                 block_device_info=None, accel_info=None, share_info=None):
        super().power_on(context, instance, network_info,
                         block_device_info=block_device_info,
                         accel_info=accel_info, share_info=share_info)
        # Whatever the power off could not release (scheduler away).
        self._puma_drain_back(context, instance)

    def resume_state_on_host_boot(self, context, instance, network_info,
                                  share_info, block_device_info=None):
        super().resume_state_on_host_boot(
            context, instance, network_info, share_info,
            block_device_info=block_device_info)
        self._puma_drain_back(context, instance)

    def rescue(self, context, instance, network_info, image_meta,
               rescue_password, block_device_info, share_info):
        super().rescue(context, instance, network_info, image_meta,
                       rescue_password, block_device_info, share_info)
        self._puma_drain_back(context, instance)

    def spawn(self, context, instance, image_meta, injected_files,
              admin_password, allocations, network_info=None,
              block_device_info=None, power_on=True, accel_info=None):
        super().spawn(context, instance, image_meta, injected_files,
                      admin_password, allocations,
                      network_info=network_info,
                      block_device_info=block_device_info,
                      power_on=power_on, accel_info=accel_info)
        # is_allowed first: an instance that cannot split is never asked
        # for its host (test_instance_without_split_not_asked).
        if (instance.task_state == task_states.REBUILD_SPAWNING and
                split.is_allowed(instance)):
            # Rebuild, or evacuate: until Nova's finish_evacuation
            # instance.host is the failed host, the split's main host.
            self._puma_drain_back(context, instance, instance.host)

    def suspend(self, context, instance):
        e = self._puma_split_entry(instance)
        if e:
            # QEMU refuses to save a split guest to a file (QEMU patch
            # 28); say why before libvirt fails. The instance stays
            # ACTIVE. A cold snapshot suspends too, and Nova's snapshot
            # path logs no reason: log it here for both.
            reason = ('instance %s keeps %s MiB of its memory on sub host '
                      '%s (split migration) and QEMU cannot save it to a '
                      'file; stop it, or live-migrate it to a host with '
                      'room for all of its memory, first'
                      % (instance.uuid, e.get('mb'), e.get('sub_host')))
            LOG.warning('Puma: refused to save the memory of %s (suspend '
                        'or cold snapshot): %s', instance.uuid, reason)
            raise exception.InstanceFaultRollback(
                inner_exception=exception.InstanceSuspendFailure(
                    reason=reason))
        super().suspend(context, instance)

    # Releasing ---------------------------------------------------------

    def _puma_instance_entries(self, ctxt, instance_uuid, host):
        """Ledger entries of an instance seen from a host (fresh read)."""
        return [e for e in self._puma_scheduler.get_ledger(ctxt, host)
                if e.get('instance_uuid') == instance_uuid]

    def _puma_set_state(self, ctxt, instance_uuid, state):
        try:
            self._puma_scheduler.split_state(ctxt, instance_uuid, state)
        except Exception as e:
            LOG.warning('Puma: could not set split state of %s to %s: %s',
                        instance_uuid, state, e)

    def _puma_release_main(self, ctxt, instance_uuid, main_host,
                           state=None):
        """Release the split of the instance whose main host is main_host.

        Another split of the instance (the one it runs with, when a move
        of a split instance fails) is left alone.

        :param state: split state to record first (e.g. 'failed')
        """
        try:
            entries = [e for e in self._puma_instance_entries(
                ctxt, instance_uuid, main_host)
                if e.get('main_host') == main_host]
        except Exception as e:
            LOG.error('Puma: cannot read the ledger to release the split of '
                      '%s on %s: %s', instance_uuid, main_host, e)
            return
        plan = self._puma_plans.get(instance_uuid)
        if plan and plan.get('main_host') != main_host:
            plan = None
        if not entries and not plan:
            return
        if state:
            self._puma_set_state(ctxt, instance_uuid, state)
        sub_host = plan['sub_host'] if plan else entries[0].get('sub_host')
        self._puma_release(ctxt, instance_uuid, main_host, sub_host)

    def _puma_release(self, ctxt, instance_uuid, main_host, sub_host):
        """Release the split of the instance with main host MAIN_HOST.

        Stops its memory server on SUB_HOST (if known), releases its
        ledger entry and drops this host's plan of it. Every step is
        idempotent and runs even when another one failed.
        """
        if sub_host:
            try:
                self._puma_compute.stop_memory_server(ctxt, sub_host,
                                                      instance_uuid)
            except Exception as e:
                LOG.error('Puma: could not stop the memory server of %s on '
                          '%s: %s', instance_uuid, sub_host, e)
        try:
            self._puma_scheduler.release_split(ctxt, instance_uuid,
                                               main_host=main_host)
        except Exception as e:
            LOG.error('Puma: could not release the split of %s on %s: %s',
                      instance_uuid, main_host, e)
        try:
            self._puma_plans.pop(instance_uuid, main_host=main_host)
        except Exception as e:
            LOG.error('Puma: could not drop the split plan of %s: %s',
                      instance_uuid, e)
        self._puma_ledger.invalidate()
        LOG.info('Puma: released the split of %s (main host %s, sub host '
                 '%s)', instance_uuid, main_host, sub_host)
