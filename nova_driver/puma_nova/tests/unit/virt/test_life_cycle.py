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
"""The driver's life-cycle hooks and a split instance.

The instance runs on dest, split with sub host sub (ledger entry done,
memory server running). Nova's own LibvirtDriver methods are stubbed;
the scheduler is the stateful double, memory servers are fake.
"""

import fixtures
from nova.compute import task_states
from nova import context as nova_context
from nova import exception
from nova import test

from puma_nova.tests.functional import scheduler_double
from puma_nova.tests.unit.virt import test_driver_ledger
from puma_nova.tests.unit.virt import test_release
from puma_nova.tests.unit.virt import test_split

GIB = 1024
LIBVIRT = 'nova.virt.libvirt.driver.LibvirtDriver.'


class LifeCycleTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.ctxt = nova_context.get_admin_context()
        self.instance = test_split._instance({'puma:split': 'allowed'})
        self.instance.project_id = 'p'
        self.instance.host = 'dest'
        self.instance.task_state = None
        self.uuid = self.instance.uuid
        self.sched = scheduler_double.SchedulerDouble(
            sub_hosts=['sub'], main_limits={'dest': 2 * GIB})
        self.computes = test_release.FakeComputes()
        self.sched.plan_split(self.ctxt, self.uuid, 4 * GIB, 'dest', 'p')
        self.sched.split_state(self.ctxt, self.uuid, 'running')
        self.sched.split_state(self.ctxt, self.uuid, 'done')
        self.computes.running.add(('sub', self.uuid))
        self.drv = test_driver_ledger._driver(self, 'dest', self.sched,
                                              self.computes)
        # Nova's libvirt methods the hooks extend, as called.
        self.called = []

    def _stub(self, name, exc=None):
        def stub(drv, *args, **kwargs):
            self.called.append(name)
            if exc:
                raise exc
        self.useFixture(fixtures.MonkeyPatch(LIBVIRT + name, stub))

    def _assert_released(self):
        self.assertEqual({}, self.sched.ledger)
        self.assertIn(('release_split', self.uuid, 'dest'), self.sched.calls)
        self.assertEqual(set(), self.computes.running)

    def _assert_kept(self):
        self.assertEqual('done', self.sched.ledger[self.uuid]['state'])
        self.assertEqual({('sub', self.uuid)}, self.computes.running)

    def test_hard_reboot_drains_back(self):
        self._stub('reboot')
        self.drv.reboot(self.ctxt, self.instance, [], 'HARD')
        self.assertEqual(['reboot'], self.called)
        self._assert_released()

    def test_soft_reboot_drains_back(self):
        # libvirt's soft reboot is a shutdown and a new start of QEMU.
        self._stub('reboot')
        self.drv.reboot(self.ctxt, self.instance, [], 'SOFT')
        self._assert_released()

    def test_failed_reboot_keeps_the_split(self):
        self._stub('reboot', exception.NovaException('libvirt said no'))
        self.assertRaises(exception.NovaException, self.drv.reboot,
                          self.ctxt, self.instance, [], 'HARD')
        self._assert_kept()

    def test_power_off_drains_back(self):
        self._stub('power_off')
        self.drv.power_off(self.instance, timeout=5, retry_interval=1)
        self.assertEqual(['power_off'], self.called)
        self._assert_released()

    def test_power_on_drains_back_what_is_left(self):
        # e.g. stopped while the scheduler was away.
        self._stub('power_on')
        self.drv.power_on(self.ctxt, self.instance, [])
        self.assertEqual(['power_on'], self.called)
        self._assert_released()

    def test_resume_state_on_host_boot_drains_back(self):
        self._stub('resume_state_on_host_boot')
        self.drv.resume_state_on_host_boot(self.ctxt, self.instance, [],
                                           None)
        self._assert_released()

    def test_rescue_drains_back(self):
        self._stub('rescue')
        self.drv.rescue(self.ctxt, self.instance, [], None, 'pw', None,
                        None)
        self.assertEqual(['rescue'], self.called)
        self._assert_released()

    def test_rebuild_spawn_drains_back(self):
        self._stub('spawn')
        self.instance.task_state = task_states.REBUILD_SPAWNING
        self.drv.spawn(self.ctxt, self.instance, None, [], 'pw', {})
        self._assert_released()

    def test_evacuate_spawn_releases_the_failed_main_host(self):
        # Until Nova's finish_evacuation, instance.host names the host
        # the instance is evacuated from.
        self._stub('spawn')
        self.instance.task_state = task_states.REBUILD_SPAWNING
        src = test_driver_ledger._driver(self, 'src', self.sched,
                                         self.computes)
        src.spawn(self.ctxt, self.instance, None, [], 'pw', {})
        self.assertEqual(['spawn'], self.called)
        self._assert_released()

    def test_boot_does_not_ask_the_scheduler(self):
        self._stub('spawn')
        self.instance.task_state = task_states.SPAWNING
        calls = list(self.sched.calls)
        self.drv.spawn(self.ctxt, self.instance, None, [], 'pw', {})
        self.assertEqual(calls, self.sched.calls)
        self._assert_kept()

    def test_suspend_refused(self):
        self._stub('suspend')
        e = self.assertRaises(exception.InstanceFaultRollback,
                              self.drv.suspend, self.ctxt, self.instance)
        self.assertIsInstance(e.inner_exception,
                              exception.InstanceSuspendFailure)
        self.assertIn('keeps 2048 MiB of its memory on sub host sub',
                      str(e.inner_exception))
        self.assertEqual([], self.called)
        self._assert_kept()

    def test_suspend_of_an_instance_not_split(self):
        self._stub('suspend')
        self.sched.release_split(self.ctxt, self.uuid)
        self.drv.suspend(self.ctxt, self.instance)
        self.assertEqual(['suspend'], self.called)

    def test_instance_without_split_not_asked(self):
        self.instance = test_split._instance()
        self.instance.task_state = task_states.REBUILD_SPAWNING
        calls = list(self.sched.calls)
        for name in ('reboot', 'power_off', 'spawn', 'suspend'):
            self._stub(name)
        self.drv.reboot(self.ctxt, self.instance, [], 'HARD')
        self.drv.power_off(self.instance)
        self.drv.spawn(self.ctxt, self.instance, None, [], 'pw', {})
        self.drv.suspend(self.ctxt, self.instance)
        self.assertEqual(calls, self.sched.calls)
