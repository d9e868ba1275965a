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

"""Placement sees what a split lends as soon as the split is planned.

The same cloud as test_split_migration (src, dest, sub; the scheduler
double writes to the placement fixture with puma-scheduler's client).
No periodic update of the sub host runs between the plan and the checks
unless a test runs it.
"""

from unittest import mock

from nova import context as nova_context
from nova import exception
from nova import objects

from puma_nova.compute import memory_server
from puma_nova.scheduler import placement
from puma_nova.tests.functional import test_split_migration as base

GIB = base.GIB


class SplitPlacementTest(base.PumaServersTestBase):

    def _reserved(self, host):
        return self._memory_inventory(host)['reserved']

    def _plan_on_dest(self, server):
        """Plan as dest's live-migration check does.

        The Puma scheduler plans, the memory server starts on sub;
        nothing migrates.
        """
        ctxt = nova_context.get_admin_context()
        instance = objects.Instance.get_by_uuid(ctxt, server['id'])
        return self.dest.driver._puma_plan_if_needed(ctxt, instance, None)

    def _fill_sub(self):
        """Leave sub room for one 16 GiB instance, and not 4 GiB more.

        sub has 16 GiB and a RAM allocation ratio of 2: 32 GiB in
        placement, 16 GiB at most per instance (max_unit). After 14 GiB
        allocated, a 16 GiB instance fits only while the 2 GiB a split
        lends (4 GiB of placement's capacity) are free.

        :returns: the id of a 16 GiB flavor
        """
        filler = self._create_flavor(memory_mb=14 * GIB, vcpu=1, disk=1,
                                     ephemeral=0)
        self._create_server(flavor_id=filler, host='sub', networks='none')
        return self._create_flavor(memory_mb=16 * GIB, vcpu=1, disk=1,
                                   ephemeral=0)

    def test_plan_reserves_the_sub_host_before_any_periodic_update(self):
        base_sub = self._memory_inventory('sub')
        big = self._fill_sub()
        server = self._boot(self._split_flavor())

        plan = self._plan_on_dest(server)

        self.assertEqual('sub', plan['sub_host'])
        self.assertEqual(2 * GIB, plan['remote_mb'])
        # Placement has it at once, before sub's periodic update.
        self.assertEqual(base_sub['reserved'] + 2 * GIB,
                         self._reserved('sub'))
        # Nova cannot place an instance on the memory being lent.
        refused = self._create_server(flavor_id=big, host='sub',
                                      networks='none',
                                      expected_state='ERROR')
        self.assertIn('No valid host', refused['fault']['message'])

        # The periodic update confirms it, neither undone nor counted
        # twice.
        self._run_periodics()
        self.assertEqual(base_sub['reserved'] + 2 * GIB,
                         self._reserved('sub'))
        self._run_periodics()
        self.assertEqual(base_sub['reserved'] + 2 * GIB,
                         self._reserved('sub'))

    def test_stale_ledger_cache_does_not_reset_the_plan(self):
        base_sub = self._memory_inventory('sub')
        server = self._boot(self._split_flavor())
        self._plan_on_dest(server)
        self.assertEqual(base_sub['reserved'] + 2 * GIB,
                         self._reserved('sub'))
        # sub's last ledger read is from before the plan (a read the
        # plan overtook), and it keeps it for an hour.
        cache = self.sub.driver._puma_ledger
        cache._max_age = 3600
        with mock.patch.object(cache, '_fetch', return_value=[]):
            cache.invalidate()
            self.assertEqual([], cache.refresh('sub'))

        # Nova's report client reads placement again, then sub updates
        # its provider with the ledger read before the plan.
        self.sub.manager.rt.reportclient.clear_provider_cache()
        self._run_periodics()
        self._run_periodics()
        self.assertEqual(base_sub['reserved'] + 2 * GIB,
                         self._reserved('sub'))

    def test_split_release_gives_the_memory_back(self):
        base_dest = self._memory_inventory('dest')
        base_sub = self._memory_inventory('sub')
        server = self._boot(self._split_flavor())
        seen = {}
        real = self.src.driver._live_migration_operation

        def operation(*args, **kwargs):
            # What placement has when the memory server starts filling.
            seen['reserved'] = self._reserved('sub')
            return real(*args, **kwargs)

        with mock.patch.object(self.src.driver, '_live_migration_operation',
                               operation):
            self._live_migrate(server, 'completed', host='dest')
        self.assertEqual(base_sub['reserved'] + 2 * GIB, seen['reserved'])
        self._run_periodics()
        self.assertEqual(base_sub['reserved'] + 2 * GIB,
                         self._reserved('sub'))
        self._assert_placement_clean()

        self._delete_server(server)
        self.assertEqual({}, self.sched.ledger)
        # Given back at the release, before any periodic update.
        self.assertEqual(base_sub['reserved'], self._reserved('sub'))
        self._run_periodics()
        self.assertEqual(base_sub, self._memory_inventory('sub'))
        self.assertEqual(base_dest, self._memory_inventory('dest'))
        self._assert_placement_clean()

    def test_refused_migration_gives_the_plan_back(self):
        base_sub = self._memory_inventory('sub')
        server = self._boot(self._split_flavor())
        # The memory server cannot start: the plan is released.
        with mock.patch.object(self.lending, 'give_back',
                               wraps=self.lending.give_back) as give_back, \
                mock.patch.object(
                    self.agents['sub'].memory_servers, 'start',
                    side_effect=memory_server.MemoryServerError('boom')):
            self.assertRaises(exception.MigrationPreCheckError,
                              self._plan_on_dest, server)
        give_back.assert_called_once_with('sub', 2 * GIB)
        self.assertEqual({}, self.sched.ledger)
        self.assertEqual(base_sub['reserved'], self._reserved('sub'))

    def test_generation_conflict_is_retried(self):
        server = self._boot(self._split_flavor())
        rp = self._rp('sub')
        real = self.lending._read
        reads = []

        def read(rp_uuid):
            answer = real(rp_uuid)
            reads.append(answer[0])
            if len(reads) == 1:
                # Someone else changes the provider between our read and
                # our write: an operator reserves 512 MiB more.
                inv = self._memory_inventory('sub')
                inv['reserved'] += 512
                inv['resource_provider_generation'] = answer[0]
                resp = self.placement.put(
                    '/resource_providers/%s/inventories/MEMORY_MB' % rp,
                    inv, version='1.26')
                self.assertEqual(200, resp.status)
            return answer

        with mock.patch.object(self.lending, '_read', read):
            self._plan_on_dest(server)
        self.assertEqual(2, len(reads))
        self.assertNotEqual(reads[0], reads[1])
        # Neither change is lost.
        self.assertEqual(512 + 2 * GIB, self._reserved('sub'))

    def test_sub_host_without_room_fails_the_plan(self):
        # Instances Nova placed on sub take the room a split needs.
        big = self._fill_sub()
        self._create_server(flavor_id=big, host='sub', networks='none')
        server = self._boot(self._split_flavor())
        base_sub = self._memory_inventory('sub')

        ex = self.assertRaises(exception.MigrationPreCheckError,
                               self._plan_on_dest, server)

        self.assertIn('cannot reserve 2048 MiB of sub host sub in '
                      'placement', str(ex))
        self.assertIn('cannot lend 2048 MiB', str(ex))
        # Nothing left behind: no ledger entry, no memory server, no
        # plan on dest, placement untouched.
        self.assertEqual({}, self.sched.ledger)
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        self.assertIsNone(self.dest.driver._puma_plans.get(server['id']))
        self.assertEqual(base_sub, self._memory_inventory('sub'))
        self._run_periodics()
        self.assertEqual(base_sub, self._memory_inventory('sub'))
        self._assert_placement_clean()

    def test_placement_client_errors_are_clear(self):
        lending = placement.PlacementLending(adapter=self.lending.adapter)
        ex = self.assertRaises(placement.PlacementError, lending.lend,
                               'nosuchhost', 1)
        self.assertIn('no resource provider named nosuchhost', str(ex))
