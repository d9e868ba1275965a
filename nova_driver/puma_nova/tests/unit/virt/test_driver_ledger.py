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
"""The driver and the ledger: placement and planned splits stay true.

The driver runs against the stateful scheduler double and fake memory
servers (test_release.FakeComputes); Nova's own LibvirtDriver methods it
extends are stubbed.
"""

import os
import threading

import fixtures
from nova.compute import provider_tree
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test
import os_resource_classes as orc
from oslo_utils.fixture import uuidsentinel as uuids

from puma_nova.compute import split_plans
from puma_nova.tests.functional import scheduler_double
from puma_nova.tests.unit.virt import test_release
from puma_nova.tests.unit.virt import test_split
from puma_nova.virt import driver as puma_driver
from puma_nova.virt import ledger

GIB = 1024
LIBVIRT = 'nova.virt.libvirt.driver.LibvirtDriver.'


def _driver(test, host, sched, computes, fetch=None, max_age=0):
    """A Puma driver of HOST, its plans in a directory of TEST's."""
    drv = puma_driver.PumaLibvirtDriver.__new__(
        puma_driver.PumaLibvirtDriver)
    drv._puma_host = host
    drv._puma_scheduler_api = sched
    drv._puma_compute_api = computes
    drv._puma_plans = split_plans.SplitPlans(
        os.path.join(test.useFixture(fixtures.TempDir()).path,
                     split_plans.FILE), host)
    drv._puma_lock = threading.Lock()
    drv._puma_local = threading.local()
    drv._puma_shoot4u = False
    drv._puma_exclusive_cache = False
    ctxt = nova_context.get_admin_context()
    drv._puma_reserved = ledger.ReservedKeeper()
    drv._puma_ledger = ledger.LedgerCache(
        fetch or (lambda h: sched.get_ledger(ctxt, h)), max_age)
    return drv


class ProviderTreeNoRPCTest(test.NoDBTestCase):
    """update_provider_tree runs under the resource tracker's lock."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'update_provider_tree', lambda *a, **kw: None))
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'get_available_resource', lambda drv, node: {}))
        self.entries = [{'instance_uuid': 'a', 'main_host': 'h',
                         'sub_host': 's', 'mb': GIB, 'state': 'done'}]
        # Whether each ledger read happened inside update_provider_tree.
        self.fetches = []
        self.inside = False
        self.drv = _driver(self, 'h', None, None, fetch=self._fetch)

    def _fetch(self, host):
        self.fetches.append(self.inside)
        return list(self.entries)

    def _update(self):
        tree = provider_tree.ProviderTree()
        tree.new_root('h', uuids.rp)
        tree.update_inventory('h', {orc.MEMORY_MB: {
            'total': 8 * GIB, 'max_unit': 8 * GIB, 'reserved': 0,
            'min_unit': 1, 'step_size': 1, 'allocation_ratio': 1.0}})
        self.inside = True
        try:
            self.drv.update_provider_tree(tree, 'h')
        finally:
            self.inside = False
        return tree.data('h').inventory[orc.MEMORY_MB]

    def test_no_rpc_inside_update_provider_tree(self):
        # The periodic update: get_available_resource (no lock), then
        # update_provider_tree (under COMPUTE_RESOURCE_SEMAPHORE).
        self.drv.get_available_resource('h')
        self.assertEqual(9 * GIB, self._update()['total'])
        self.assertEqual([False], self.fetches)
        # A split event invalidates the cache; claims that update the
        # provider tree in between still use the last read, without RPC.
        self.drv._puma_ledger.invalidate()
        self.entries = []
        self.assertEqual(9 * GIB, self._update()['total'])
        self.assertEqual([False], self.fetches)
        self.drv.get_available_resource('h')
        self.assertEqual(8 * GIB, self._update()['total'])
        self.assertEqual([False, False], self.fetches)


class ProviderTreeReservedTest(test.NoDBTestCase):
    """The sub host's reserved: what puma-scheduler wrote stays."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'update_provider_tree', self._libvirt_update))
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'get_available_resource', lambda drv, node: {}))
        self.entries = []
        self.drv = _driver(self, 's', None, None,
                           fetch=lambda h: list(self.entries))
        self.tree = provider_tree.ProviderTree()
        self.tree.new_root('s', uuids.rp)

    @staticmethod
    def _libvirt_update(drv, tree, nodename, allocations=None):
        # Nova's libvirt driver: reserved_host_memory_mb, here 512.
        tree.update_inventory(nodename, {orc.MEMORY_MB: {
            'total': 8 * GIB, 'max_unit': 8 * GIB, 'reserved': 512,
            'min_unit': 1, 'step_size': 1, 'allocation_ratio': 1.0}})

    def _placement_has(self, reserved):
        """What Nova's report client read from placement."""
        inv = {orc.MEMORY_MB: {
            'total': 8 * GIB, 'max_unit': 8 * GIB, 'reserved': reserved,
            'min_unit': 1, 'step_size': 1, 'allocation_ratio': 1.0}}
        self.tree.update_inventory('s', inv)

    def _periodic(self):
        self.drv.get_available_resource('s')
        self.drv.update_provider_tree(self.tree, 's')
        return self.tree.data('s').inventory[orc.MEMORY_MB]['reserved']

    def test_first_update_applies_the_ledger(self):
        self.entries = [{'instance_uuid': 'a', 'main_host': 'm',
                         'sub_host': 's', 'mb': GIB, 'state': 'done'}]
        self.assertEqual(512 + GIB, self._periodic())

    def test_plan_written_by_the_scheduler_is_kept(self):
        self._periodic()
        # The scheduler lent 1 GiB; a stale read (no entry) is used.
        self._placement_has(512 + GIB)
        self.drv._puma_ledger._max_age = 3600
        self.assertEqual(512 + GIB, self._periodic())
        self.assertEqual(512 + GIB, self._periodic())
        # The read that has it agrees.
        self.entries = [{'instance_uuid': 'a', 'main_host': 'm',
                         'sub_host': 's', 'mb': GIB, 'state': 'planned'}]
        self.drv._puma_ledger.invalidate()
        self.assertEqual(512 + GIB, self._periodic())

    def test_give_back_that_never_reached_placement_is_corrected(self):
        self._placement_has(512 + GIB)
        # Two reads without the entry, placement still has it.
        self.assertEqual(512 + GIB, self._periodic())
        self.assertEqual(512, self._periodic())


class PlannedSplitTest(test.NoDBTestCase):
    """A split planned by puma-api before Nova checks the destination."""

    def setUp(self):
        super().setUp()
        self.ctxt = nova_context.get_admin_context()
        self.instance = test_split._instance({'puma:split': 'allowed'})
        self.instance.project_id = 'p'
        self.instance.host = 'src'
        self.uuid = self.instance.uuid
        self.migration = objects.Migration(uuid=uuids.migration)
        self.sched = scheduler_double.SchedulerDouble(
            sub_hosts=['sub'], main_limits={'dest': 2 * GIB})
        self.computes = test_release.FakeComputes()
        self.drv = _driver(self, 'dest', self.sched, self.computes)
        # What POST /v1/split-migrations does before asking Nova.
        self.sched.plan_split(self.ctxt, self.uuid, 4 * GIB, 'dest', 'p')

    def test_destination_that_fits_moves_it_whole(self):
        self.drv._puma_free_mb = lambda: 8 * GIB
        self.assertIsNone(self.drv._puma_plan_if_needed(
            self.ctxt, self.instance, self.migration))
        # The plan is given back...
        self.assertEqual({}, self.sched.ledger)
        self.assertIn(('release_split', self.uuid, 'dest'),
                      self.sched.calls)
        self.assertEqual(set(), self.computes.running)
        # ...and the migration goes on as a plain one.
        self.drv._puma_pre_live_migration(self.ctxt, self.instance)
        self.assertIsNone(self.drv._puma_plans.get(self.uuid))

    def test_failed_destination_check_releases_the_plan(self):
        # e.g. the CPU comparison with the source fails.
        def refuse(*args, **kwargs):
            raise exception.MigrationPreCheckError(reason='CPU')

        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'check_can_live_migrate_destination', refuse))
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'cleanup_live_migration_destination_check',
            lambda *a: None))
        self.assertRaises(exception.MigrationPreCheckError,
                          self.drv.check_can_live_migrate_destination,
                          self.ctxt, self.instance, {}, {})
        self.assertEqual({}, self.sched.ledger)

    def test_failed_check_after_the_destination_releases_the_plan(self):
        # The destination's own check passes, then the source's check
        # (or a claim) fails: Nova still calls the cleanup hook.
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'check_can_live_migrate_destination',
            lambda *a, **kw: 'dest-check-data'))
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'cleanup_live_migration_destination_check',
            lambda *a: None))
        data = self.drv.check_can_live_migrate_destination(
            self.ctxt, self.instance, {}, {})
        self.assertEqual('planned', self.sched.ledger[self.uuid]['state'])
        self.drv.cleanup_live_migration_destination_check(self.ctxt, data)
        self.assertEqual({}, self.sched.ledger)

    def test_passed_check_keeps_the_plan(self):
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'check_can_live_migrate_destination',
            lambda *a, **kw: 'dest-check-data'))
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'check_source_migrate_data_at_dest',
            lambda drv, ctxt, inst, data, *a: data))
        self.useFixture(fixtures.MonkeyPatch(
            LIBVIRT + 'cleanup_live_migration_destination_check',
            lambda *a: None))
        self.drv._puma_free_mb = lambda: 3 * GIB
        data = self.drv.check_can_live_migrate_destination(
            self.ctxt, self.instance, {}, {})
        self.drv.check_source_migrate_data_at_dest(
            self.ctxt, self.instance, 'migrate-data', self.migration, None,
            None)
        self.drv.cleanup_live_migration_destination_check(self.ctxt, data)
        self.assertEqual('planned', self.sched.ledger[self.uuid]['state'])
        self.assertEqual({('sub', self.uuid)}, self.computes.running)
        self.assertEqual('sub', self.drv._puma_plans.get(self.uuid)[
            'sub_host'])

    def test_plan_left_by_an_earlier_attempt_is_superseded(self):
        # Nova checked 'old' first and gave it up after its checks (port
        # binding failed there); now this host is checked.
        self.sched.release_split(self.ctxt, self.uuid)
        self.sched.sub_hosts = ['sub', 'sub2']
        self.sched.main_limits['old'] = 2 * GIB
        self.sched.plan_split(self.ctxt, self.uuid, 4 * GIB, 'old', 'p')
        self.drv._puma_free_mb = lambda: 3 * GIB
        plan = self.drv._puma_plan_if_needed(self.ctxt, self.instance,
                                             self.migration)
        self.assertEqual(('dest', 'sub2'), (plan['main_host'],
                                            plan['sub_host']))
        self.assertEqual([('dest', 'planned')],
                         [(e['main_host'], e['state'])
                          for e in self.sched.entries])
