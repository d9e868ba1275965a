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
"""What the driver releases when a move of a split instance fails.

The driver's release helpers run against the stateful scheduler double
(the contract's ledger, several splits per server) and a fake of the
compute hosts' memory servers; no Nova services.
"""

import os
import threading

import fixtures
from nova import context as nova_context
from nova import exception
from nova import test

from puma_nova.compute import split_plans
from puma_nova.tests.functional import scheduler_double
from puma_nova.tests.unit.virt import test_split
from puma_nova.virt import driver as puma_driver
from puma_nova.virt import ledger

GIB = 1024


class FakeComputes(object):
    """Memory servers per (host, instance), as ComputeAPI reaches them."""

    def __init__(self):
        self.running = set()

    def start_memory_server(self, ctxt, host, instance_uuid, size_mb,
                            clients=None):
        self.running.add((host, instance_uuid))
        return {'uri': 'tcp:192.0.2.1:4000'}

    def stop_memory_server(self, ctxt, host, instance_uuid):
        self.running.discard((host, instance_uuid))


class ReleaseTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.instance = test_split._instance({'puma:split': 'allowed'})
        self.instance.project_id = 'p'
        # It runs on dest, split with sub, and moves back to src.
        self.instance.host = 'dest'
        self.uuid = self.instance.uuid
        self.ctxt = nova_context.get_admin_context()
        self.sched = scheduler_double.SchedulerDouble(
            sub_hosts=['sub', 'sub2'],
            main_limits={'dest': 2 * GIB, 'src': 2 * GIB})
        self.computes = FakeComputes()
        # A split the instance runs with: main host dest, sub host sub.
        self.sched.plan_split(self.ctxt, self.uuid, 4 * GIB, 'dest', 'p')
        self.sched.split_state(self.ctxt, self.uuid, 'running')
        self.sched.split_state(self.ctxt, self.uuid, 'done')
        self.computes.running.add(('sub', self.uuid))
        self.first = dict(self.sched.ledger[self.uuid])

    def _driver(self, host):
        drv = puma_driver.PumaLibvirtDriver.__new__(
            puma_driver.PumaLibvirtDriver)
        drv._puma_host = host
        drv._puma_scheduler_api = self.sched
        drv._puma_compute_api = self.computes
        drv._puma_plans = split_plans.SplitPlans(
            os.path.join(self.useFixture(fixtures.TempDir()).path,
                         split_plans.FILE), host)
        drv._puma_lock = threading.Lock()
        drv._puma_reserved = ledger.ReservedKeeper()
        drv._puma_ledger = ledger.LedgerCache(
            lambda h: self.sched.get_ledger(self.ctxt, h), 0)
        return drv

    def _second_hop_to_src(self):
        """dest -> src, split again: planned on src, server on sub2."""
        plan = self.sched.plan_split(self.ctxt, self.uuid, 4 * GIB, 'src',
                                     'p')
        self.assertEqual('sub2', plan['sub_host'])
        self.computes.start_memory_server(self.ctxt, 'sub2', self.uuid,
                                          plan['remote_mb'])
        self.sched.split_state(self.ctxt, self.uuid, 'running')

    def test_rollback_at_source_releases_only_the_move(self):
        self._second_hop_to_src()
        # What rollback_live_migration_at_source on dest does.
        self._driver('dest')._puma_release_main(self.ctxt, self.uuid, 'src',
                                                state='failed')
        self.assertEqual({self.uuid: self.first}, self.sched.ledger)
        self.assertEqual({('sub', self.uuid)}, self.computes.running)
        self.assertIn(('release_split', self.uuid, 'src'), self.sched.calls)
        self.assertNotIn(('release_split', self.uuid, None),
                         self.sched.calls)

    def test_rollback_at_destination_releases_only_its_plan(self):
        self._second_hop_to_src()
        src = self._driver('src')
        src._puma_plans.keep({'instance_uuid': self.uuid,
                              'main_host': 'src', 'sub_host': 'sub2'})
        src._puma_release(self.ctxt, self.uuid, 'src', 'sub2')
        self.assertEqual({self.uuid: self.first}, self.sched.ledger)
        self.assertEqual({('sub', self.uuid)}, self.computes.running)
        self.assertEqual({}, src._puma_plans.list())

    def test_leaving_the_main_host_releases_its_split(self):
        # The instance left dest (post_live_migration_at_source, delete).
        self._driver('dest')._puma_release_main(self.ctxt, self.uuid,
                                                'dest')
        self.assertEqual({}, self.sched.ledger)
        self.assertEqual(set(), self.computes.running)

    def test_busy_sub_host_is_refused_and_released(self):
        # A scheduler that offers the sub host of the current split.
        self.sched.sub_hosts = ['sub2']
        src = self._driver('src')
        ex = self.assertRaises(
            exception.MigrationPreCheckError, src._puma_request_plan,
            self.ctxt, self.instance, 4 * GIB, 2 * GIB,
            busy_sub_hosts={'sub2'})
        self.assertIn('sub host sub2 still serves the current split',
                      str(ex))
        self.assertEqual({self.uuid: self.first}, self.sched.ledger)
        self.assertEqual({('sub', self.uuid)}, self.computes.running)
