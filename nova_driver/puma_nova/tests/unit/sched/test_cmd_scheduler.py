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
"""puma-scheduler as a process: oslo.service's launcher and its signals.

The real command (python -m puma_nova.cmd.scheduler) on an in-process
fake:// bus and a SQLite database: SIGHUP re-reads the configuration
files (a mutable option takes its new value in a new worker), SIGTERM
stops master and worker cleanly with status 0.
"""

import os
import signal
import subprocess
import sys
import time

import fixtures
import testtools

CONF_TEMPLATE = """[DEFAULT]
transport_url = fake://
[database]
connection = sqlite:///%(db)s
[puma_scheduler]
host = t1
planning_interval = %(interval)d
"""


class TestSchedulerProcess(testtools.TestCase):

    def _write_conf(self, interval):
        with open(self.conf, 'w') as f:
            f.write(CONF_TEMPLATE % {'db': self.db, 'interval': interval})

    def _wait_log(self, text, count=1, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log) as f:
                out = f.read()
            if out.count(text) >= count:
                return out
            time.sleep(0.2)
        self.fail('no %r (x%d) in the log:\n%s' % (text, count, out))

    def test_sighup_reloads_and_sigterm_stops(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.conf = os.path.join(tmp, 'puma.conf')
        self.db = os.path.join(tmp, 'puma.sqlite')
        self.log = os.path.join(tmp, 'log')
        self._write_conf(30)
        env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='true')
        subprocess.run([sys.executable, '-m', 'puma_nova.cmd.manage',
                        '--config-file', self.conf, 'db', 'sync'],
                       check=True, env=env, timeout=120)
        with open(self.log, 'w') as log:
            proc = subprocess.Popen(
                [sys.executable, '-m', 'puma_nova.cmd.scheduler',
                 '--config-file', self.conf], stdout=log,
                stderr=subprocess.STDOUT, env=env)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        serving = 'serving topic puma-scheduler'
        self._wait_log(serving)
        self._write_conf(7)
        proc.send_signal(signal.SIGHUP)
        out = self._wait_log(serving, count=2)
        self.assertIn('Option puma_scheduler.planning_interval changed '
                      'from [30] to [7]', out)
        self.assertIsNone(proc.poll())
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(0, proc.wait(timeout=60))
