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
"""The driver checks this host's memory servers now and periodically."""

import threading
from unittest import mock

import fixtures

from nova import test

from puma_nova.virt import driver as puma_driver


class MemoryServerChecksTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.drv = puma_driver.PumaLibvirtDriver.__new__(
            puma_driver.PumaLibvirtDriver)
        self.drv._puma_stop = threading.Event()
        self.drv._puma_supervisor = None
        self.checked = threading.Semaphore(0)
        self.drv._puma_memory_servers = mock.Mock()

        def check():
            self.checked.release()
            if self.drv._puma_memory_servers.check.call_count == 1:
                raise OSError('state file unwritable')
            return {}
        self.drv._puma_memory_servers.check.side_effect = check
        self.addCleanup(self._stop)

    def _stop(self):
        self.drv._puma_stop.set()
        if self.drv._puma_supervisor is not None:
            self.drv._puma_supervisor.join(10)
            self.assertFalse(self.drv._puma_supervisor.is_alive())

    def test_checked_at_start_and_again_after_a_failure(self):
        self.flags(memory_server_check_interval=1, group='puma')
        self.drv.puma_supervise_memory_servers()
        # The first check runs at once and fails; the loop goes on.
        for _ in range(3):
            self.assertTrue(self.checked.acquire(timeout=30))
        self.drv._puma_stop.set()
        self.drv._puma_supervisor.join(10)
        self.assertFalse(self.drv._puma_supervisor.is_alive())

    def test_zero_disables_the_checks(self):
        self.flags(memory_server_check_interval=0, group='puma')
        self.drv.puma_supervise_memory_servers()
        self.assertIsNone(self.drv._puma_supervisor)
        self.drv._puma_memory_servers.check.assert_not_called()


class MemoryServerWatchdogConfigTest(test.NoDBTestCase):
    """The watchdog timeout reaches the memory servers with the checks."""

    def _init(self):
        drv = puma_driver.PumaLibvirtDriver.__new__(
            puma_driver.PumaLibvirtDriver)
        self.flags(instances_path=self.useFixture(
            fixtures.TempDir()).path)
        with mock.patch.object(puma_driver.memory_server,
                               'MemoryServers') as servers:
            drv.puma_init_memory_servers('c')
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
