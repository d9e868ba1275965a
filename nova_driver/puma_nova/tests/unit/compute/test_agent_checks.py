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
"""The agent checks this host's memory servers now and periodically."""

import threading
from unittest import mock

import fixtures

from nova import test

from puma_nova.compute import agent


class MemoryServerChecksTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(report_interval=0, lending_tell_guests=False,
                   group='puma')
        self.agent = agent.ComputeAgent.__new__(agent.ComputeAgent)
        self.agent.host = 'c'
        self.agent.shoot4u = False
        self.agent._libvirt = None
        self.agent._stop = threading.Event()
        self.agent._threads = []
        self.agent.guest_pairs = mock.Mock()
        self.checked = threading.Semaphore(0)
        self.agent.memory_servers = mock.Mock()

        def check():
            self.checked.release()
            if self.agent.memory_servers.check.call_count == 1:
                raise OSError('state file unwritable')
            return {}
        self.agent.memory_servers.check.side_effect = check
        self.addCleanup(self.agent.stop)

    def test_checked_at_start_and_again_after_a_failure(self):
        self.flags(memory_server_check_interval=1, group='puma')
        self.agent.start()
        # The first check runs at once and fails; the loop goes on.
        for _ in range(3):
            self.assertTrue(self.checked.acquire(timeout=30))
        threads = list(self.agent._threads)
        self.assertEqual(['puma-memory-servers'], [t.name for t in threads])
        self.agent.stop()
        self.assertFalse(any(t.is_alive() for t in threads))

    def test_zero_disables_the_checks(self):
        self.flags(memory_server_check_interval=0, group='puma')
        self.agent.start()
        self.assertEqual([], self.agent._threads)
        self.agent.memory_servers.check.assert_not_called()

    def test_stop_does_not_wait_for_a_call_in_flight(self):
        # A report that waits for an absent scheduler (rpc_timeout) does
        # not hold the agent's stop for longer than STOP_GRACE.
        self.flags(memory_server_check_interval=0, group='puma')
        release = threading.Event()
        busy = threading.Thread(target=release.wait, name='puma-report',
                                daemon=True)
        busy.start()
        self.addCleanup(release.set)
        self.agent._threads = [busy]
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.agent.STOP_GRACE', 0.2))
        self.agent.stop()
        self.assertTrue(busy.is_alive())
        self.assertEqual([], self.agent._threads)


class MemoryServerWatchdogConfigTest(test.NoDBTestCase):
    """The watchdog timeout reaches the memory servers with the checks."""

    def _init(self):
        self.flags(instances_path=self.useFixture(
            fixtures.TempDir()).path)
        with mock.patch.object(agent.memory_server,
                               'MemoryServers') as servers:
            agent.memory_servers()
        return servers.call_args.kwargs['watchdog_timeout']

    def test_default(self):
        self.assertEqual(30, self._init())

    def test_set(self):
        self.flags(memory_server_watchdog_timeout=5, group='puma')
        self.assertEqual(5, self._init())

    def test_no_watchdog_without_the_checks(self):
        # Nothing would read the notifications.
        self.flags(memory_server_check_interval=0, group='puma')
        self.assertEqual(0, self._init())
