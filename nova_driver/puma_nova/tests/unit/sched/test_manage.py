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
"""puma-manage ledger list-stale / expire, run as the installed command."""

import os
import subprocess
import sys

import fixtures

from puma_nova.db import api as db_api
from puma_nova.db import models
from puma_nova.tests.unit.sched import base


class TestManageLedger(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(tmp, 'puma.conf')
        # No compute host listens on fake://: stopping a memory server
        # fails after rpc_timeout and is only logged.
        with open(self.conf_file, 'w') as f:
            f.write('[DEFAULT]\ntransport_url = fake://\n'
                    '[database]\nconnection = %s\n'
                    '[puma_scheduler]\nplan_ttl = 600\nrpc_timeout = 1\n'
                    % self.db.url)

    def _manage(self, *args):
        script = os.path.join(os.path.dirname(sys.executable),
                              'puma-manage')
        proc = subprocess.run([script, '--config-file', self.conf_file] +
                              list(args), capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        return proc.stdout.splitlines()

    def test_list_stale_and_expire(self):
        db_api.ledger_create(self.ctxt, 'i1', 'p1', 'm', 's', 4096, 4096)
        db_api.memory_server_set(self.ctxt, 'i1', host='s', size_mb=4096,
                                 state='reserved', uri=None)
        db_api.ledger_create(self.ctxt, 'i2', 'p1', 'm', 't', 2048, 2048)
        db_api.ledger_set_state(self.ctxt, 'i2', models.RUNNING)
        self.assertEqual(['id instance_uuid main_host sub_host mb state'],
                         self._manage('ledger', 'list-stale'))
        base.age_ledger(601)
        stale = self._manage('ledger', 'list-stale')
        self.assertEqual(['1 i1 m s 4096 planned'], stale[1:])
        self.assertEqual(stale, self._manage('ledger', 'expire'))
        self.assertEqual([('i1', 'released'), ('i2', 'running')],
                         [(e['instance_uuid'], e['state'])
                          for e in db_api.ledger_list(self.ctxt)])
        self.assertEqual(['stopped'], [m['state'] for m in
                                       db_api.memory_server_list(self.ctxt)])
        self.assertEqual(1, len(self._manage('ledger', 'list-stale')))
