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
"""The database API and the ledger state machine."""

from puma_nova.db import api as db_api
from puma_nova.db import migration
from puma_nova.db import models
from puma_nova import exception
from puma_nova.tests.unit.sched import base


class TestMigration(base.TestCase):

    def test_sync_reaches_head_and_is_idempotent(self):
        self.assertEqual('0004', migration.version())
        migration.upgrade()
        self.assertEqual('0004', migration.version())


class TestHostReport(base.TestCase):

    def test_report_replaces_vms_and_moves_them(self):
        db_api.host_report(self.ctxt, 'h1', base.stats(
            1000, [base.vm('a'), base.vm('b')]))
        db_api.host_report(self.ctxt, 'h2', base.stats(2000, [base.vm('c')]))
        db_api.host_report(self.ctxt, 'h1', base.stats(900, [base.vm('a')]))
        db_api.host_report(self.ctxt, 'h2', base.stats(
            2000, [base.vm('c'), base.vm('a', memory_mb=2048)]))
        vms = {v['uuid']: v for v in db_api.vm_list(self.ctxt)}
        self.assertEqual(['a', 'c'], sorted(vms))
        self.assertEqual(('h2', 2048), (vms['a']['host'],
                                        vms['a']['memory_mb']))
        hosts = {h['name']: h for h in db_api.host_list(self.ctxt)}
        self.assertEqual(900, hosts['h1']['free_mb'])

    def test_stale_hosts_are_filtered(self):
        db_api.host_report(self.ctxt, 'old', base.stats(1),
                           now=db_api.since(3600))
        db_api.host_report(self.ctxt, 'new', base.stats(1))
        names = [h['name'] for h in
                 db_api.host_list(self.ctxt, db_api.since(60))]
        self.assertEqual(['new'], names)


class TestLedger(base.TestCase):

    def _create(self, uuid='i1'):
        return db_api.ledger_create(self.ctxt, uuid, 'p1', 'm', 's', 2048,
                                    1024)

    def test_happy_path_and_release(self):
        self.assertEqual(models.PLANNED, self._create()['state'])
        for state in (models.RUNNING, models.DONE):
            self.assertEqual(state, db_api.ledger_set_state(
                self.ctxt, 'i1', state)['state'])
        self.assertEqual(1, db_api.ledger_release(self.ctxt, 'i1'))
        self.assertEqual(0, db_api.ledger_release(self.ctxt, 'i1'))
        self.assertEqual([models.RELEASED],
                         [e['state'] for e in db_api.ledger_list(self.ctxt)])

    def test_release_by_main_host(self):
        first = self._create()
        db_api.ledger_set_state(self.ctxt, 'i1', models.RUNNING)
        db_api.ledger_set_state(self.ctxt, 'i1', models.DONE)
        db_api.ledger_create(self.ctxt, 'i1', 'p1', 'm2', 's2', 2048, 1024)
        db_api.ledger_create(self.ctxt, 'i2', 'p1', 'm2', 's2', 2048, 1024)
        self.assertEqual(0, db_api.ledger_release(self.ctxt, 'i1',
                                                  main_host='nowhere'))
        self.assertEqual(1, db_api.ledger_release(self.ctxt, 'i1',
                                                  main_host='m2'))
        self.assertEqual(0, db_api.ledger_release(self.ctxt, 'i1',
                                                  main_host='m2'))
        self.assertEqual(
            [('i1', 'm', models.DONE), ('i1', 'm2', models.RELEASED),
             ('i2', 'm2', models.PLANNED)],
            [(e['instance_uuid'], e['main_host'], e['state'])
             for e in db_api.ledger_list(self.ctxt)])
        self.assertEqual(first['id'], db_api.ledger_list(
            self.ctxt, active_only=True)[0]['id'])

    def test_forbidden_transitions_keep_the_entry(self):
        self._create()
        self.assertRaises(exception.InvalidTransition,
                          db_api.ledger_set_state, self.ctxt, 'i1',
                          models.DONE)
        db_api.ledger_set_state(self.ctxt, 'i1', models.FAILED)
        self.assertRaises(exception.InvalidTransition,
                          db_api.ledger_set_state, self.ctxt, 'i1',
                          models.RUNNING)
        self.assertEqual([models.FAILED],
                         [e['state'] for e in db_api.ledger_list(self.ctxt)])

    def test_same_state_again_is_a_no_op(self):
        self._create()
        db_api.ledger_set_state(self.ctxt, 'i1', models.RUNNING)
        db_api.ledger_set_state(self.ctxt, 'i1', models.RUNNING)
        self.assertEqual(models.RUNNING,
                         db_api.ledger_list(self.ctxt)[0]['state'])

    def test_unknown_state_and_unknown_server(self):
        self._create()
        self.assertRaises(exception.Invalid, db_api.ledger_set_state,
                          self.ctxt, 'i1', 'flying')
        self.assertRaises(exception.LedgerNotFound, db_api.ledger_set_state,
                          self.ctxt, 'nope', models.RUNNING)

    def test_host_filter_and_commitments(self):
        self._create('i1')
        db_api.ledger_create(self.ctxt, 'i2', 'p1', 'x', 'm', 512, 256)
        db_api.ledger_set_state(self.ctxt, 'i2', models.RUNNING)
        db_api.ledger_set_state(self.ctxt, 'i2', models.DONE)
        self.assertEqual(['i1', 'i2'], [e['instance_uuid'] for e in
                                        db_api.ledger_list(self.ctxt,
                                                           host='m')])
        self.assertEqual(['i1'], [e['instance_uuid'] for e in
                                  db_api.ledger_list(self.ctxt, host='s')])
        # 'done' splits show in the hosts' own reports already.
        self.assertEqual({'m': 1024, 's': 2048},
                         db_api.ledger_commitments(self.ctxt))

    def test_stale_entries_and_conditional_release(self):
        planned = self._create('i1')
        db_api.ledger_create(self.ctxt, 'i2', 'p1', 'm', 's', 512, 256)
        db_api.ledger_set_state(self.ctxt, 'i2', models.FAILED)
        running = db_api.ledger_create(self.ctxt, 'i3', 'p1', 'm', 's', 512,
                                       256)
        db_api.ledger_set_state(self.ctxt, 'i3', models.RUNNING)
        self.assertEqual([], db_api.ledger_stale(self.ctxt,
                                                 db_api.since(60)))
        base.age_ledger(61)
        self.assertEqual(['i1', 'i2'], [e['instance_uuid'] for e in
                                        db_api.ledger_stale(
                                            self.ctxt, db_api.since(60))])
        # Only in the given states, and only the given entry.
        self.assertEqual(0, db_api.ledger_release(
            self.ctxt, 'i3', entry_id=running['id'],
            states=models.STALE_STATES))
        self.assertEqual(0, db_api.ledger_release(
            self.ctxt, 'i1', entry_id=running['id']))
        self.assertEqual(1, db_api.ledger_release(
            self.ctxt, 'i1', entry_id=planned['id'],
            states=models.STALE_STATES))
        self.assertEqual(models.RELEASED,
                         db_api.ledger_get(self.ctxt, planned['id'])['state'])
        self.assertRaises(exception.LedgerNotFound, db_api.ledger_get,
                          self.ctxt, 999)
