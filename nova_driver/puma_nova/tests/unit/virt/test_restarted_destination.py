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
"""A destination whose nova-compute restarted while a split migration ran.

The destination's driver keeps the plan in memory from its checks until
the migration ends; a restart loses it, while the source migrates with
the plan it fetched before.  When the migration completes, the
destination still records the split as done from the ledger (seen in the
lab cloud: the entry stayed 'running' for good).
"""

import fixtures
from nova import context as nova_context
from nova import test

from puma_nova.tests.functional import scheduler_double
from puma_nova.tests.unit.virt import test_driver_ledger
from puma_nova.tests.unit.virt import test_split

GIB = 1024


class RestartedDestinationTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.instance = test_split._instance({'puma:split': 'allowed'})
        self.instance.project_id = 'p'
        self.uuid = self.instance.uuid
        self.ctxt = nova_context.get_admin_context()
        self.sched = scheduler_double.SchedulerDouble(
            sub_hosts=['sub'], main_limits={'dest': 2 * GIB})
        self.libvirt_post = self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'post_live_migration_at_destination')).mock
        # A fresh driver: what nova-compute on dest has after a restart.
        self.drv = test_driver_ledger._driver(self, 'dest', self.sched, None)

    def _post(self):
        self.drv.post_live_migration_at_destination(
            self.ctxt, self.instance, network_info=[])
        self.libvirt_post.assert_called_once()

    def test_running_split_recorded_done(self):
        self.sched.plan_split(self.ctxt, self.uuid, 4 * GIB, 'dest', 'p')
        self.sched.split_state(self.ctxt, self.uuid, 'running')
        self._post()
        self.assertEqual('done', self.sched.ledger[self.uuid]['state'])

    def test_whole_migration_records_nothing(self):
        self._post()
        self.assertNotIn(('split_state', self.uuid, 'done'),
                         self.sched.calls)
        self.assertEqual({}, self.sched.ledger)

    def test_split_of_another_main_host_left_alone(self):
        # The instance ran split from another main host; this move was
        # whole.  That split is released by the source, not marked done.
        self.sched.main_limits['other'] = 2 * GIB
        self.sched.plan_split(self.ctxt, self.uuid, 4 * GIB, 'other', 'p')
        self.sched.split_state(self.ctxt, self.uuid, 'running')
        self._post()
        self.assertEqual('running', self.sched.ledger[self.uuid]['state'])

    def test_scheduler_away_does_not_fail_the_migration(self):
        def away(*args, **kwargs):
            raise OSError('scheduler away')

        self.sched.get_ledger = self.sched.split_state = away
        self._post()
