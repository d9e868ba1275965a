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
"""OSC commands against a real puma-api served on loopback."""

import socketserver
import threading
import types
from unittest import mock
from wsgiref import simple_server

from keystoneauth1 import session as ks_session
from osc_lib import exceptions

from puma_nova.api import app
from puma_nova.db import api as db_api
from puma_nova.osc import client as puma_client
from puma_nova.osc import plugin
from puma_nova.osc.v1 import host
from puma_nova.osc.v1 import ledger
from puma_nova.osc.v1 import memory_server
from puma_nova.osc.v1 import migration
from puma_nova.osc.v1 import pair
from puma_nova.osc.v1 import split
from puma_nova.tests.unit.sched import base
from puma_nova.tests.unit.sched import test_api


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class FakeCompute(object):
    """openstacksdk's compute proxy: one server and its migrations."""

    def __init__(self, server, migrations=()):
        self.server = server
        self.migrations = list(migrations)

    def find_server(self, name_or_id, ignore_missing=True):
        if name_or_id in (self.server.id, self.server.name):
            return self.server
        raise exceptions.CommandError('No Server found for %s' % name_or_id)

    def server_migrations(self, server):
        assert server is self.server
        return iter(self.migrations)


def fake_migration(mid, status='running', total=8 << 30, processed=3 << 30,
                   remaining=5 << 30, source='src', dest='m'):
    return types.SimpleNamespace(
        id=mid, status=status, source_compute=source, dest_compute=dest,
        memory_total_bytes=total, memory_processed_bytes=processed,
        memory_remaining_bytes=remaining)


class TestOSC(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(base.PolicyFixture())
        self.flags(group='puma_api', auth_strategy='noauth')
        self.flags(group='puma_scheduler', planning_interval=3600)
        rpcf = self.useFixture(base.RPCFixture(['sub']))
        self.computes = rpcf.computes
        nova = test_api.FakeNova()
        nova.servers[test_api.UUID] = {
            'id': test_api.UUID, 'name': 'big', 'host': 'src',
            'status': 'ACTIVE', 'memory_mb': 8192, 'project_id': 'p1'}
        rpcf.api.report_host(self.ctxt, 'm', base.stats(4608))
        rpcf.api.report_host(self.ctxt, 'sub', base.stats(9000))
        httpd = simple_server.make_server(
            '127.0.0.1', 0, app.build_app(rpcf.api, nova),
            server_class=_Server, handler_class=_QuietHandler)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)
        url = 'http://127.0.0.1:%d' % httpd.server_port
        self.client = puma_client.Client(ks_session.Session(),
                                         endpoint_override=url)
        self.app = types.SimpleNamespace(
            client_manager=types.SimpleNamespace(puma=self.client))

    def run_cmd(self, cls, argv):
        cmd = cls(self.app, None)
        parsed = cmd.get_parser('openstack puma').parse_args(argv)
        return cmd.take_action(parsed)

    def test_split_migrate_then_list_ledger_and_memory_servers(self):
        cols, data = self.run_cmd(split.MigrateSplit, ['big', '--host', 'm'])
        shown = dict(zip(cols, data))
        self.assertEqual({'Server': test_api.UUID, 'Main Host': 'm',
                          'Sub Host': 'sub', 'Main Limit MB': 4096,
                          'Remote MB': 4096, 'State': 'planned'}, shown)
        cols, rows = self.run_cmd(ledger.ListLedger, ['--active',
                                                      '--host', 'sub'])
        rows = list(rows)
        self.assertEqual('Instance UUID', cols[1])
        self.assertEqual([(test_api.UUID, 'm', 'sub', 4096, 'planned')],
                         [r[1:5] + (r[6],) for r in rows])
        cols, rows = self.run_cmd(memory_server.ListMemoryServer,
                                  ['--host', 'sub'])
        self.assertEqual([(test_api.UUID, 'sub', 4096, None, 'reserved')],
                         list(rows))

    def test_stale_ledger_list_and_release(self):
        self.run_cmd(split.MigrateSplit, ['big', '--host', 'm'])
        self.assertEqual([], list(self.run_cmd(ledger.ListLedger,
                                               ['--stale'])[1]))
        base.age_ledger(3600)
        (row,) = self.run_cmd(ledger.ListLedger, ['--stale'])[1]
        self.assertEqual((test_api.UUID, 'planned'), (row[1], row[6]))
        cols, data = self.run_cmd(ledger.ReleaseLedgerEntry, [str(row[0])])
        shown = dict(zip(cols, data))
        self.assertEqual((row[0], 'released'), (shown['Id'],
                                                shown['State']))
        # The sub host was told to stop the reserved memory server.
        self.assertEqual([test_api.UUID], self.computes['sub'].stopped)
        self.assertEqual([], list(self.run_cmd(ledger.ListLedger,
                                               ['--active'])[1]))

    def show_migration(self, migrations):
        server = types.SimpleNamespace(id=test_api.UUID, name='big')
        self.app.client_manager.sdk_connection = types.SimpleNamespace(
            compute=FakeCompute(server, migrations))
        cols, data = self.run_cmd(migration.ShowMigration, ['big'])
        return dict(zip(cols, data))

    def test_migration_show_of_a_running_split(self):
        self.run_cmd(split.MigrateSplit, ['big', '--host', 'm'])
        db_api.ledger_set_state(self.ctxt, test_api.UUID, 'running')
        shown = self.show_migration([fake_migration(6),
                                     fake_migration(7)])
        self.assertEqual({
            'Server': test_api.UUID, 'Name': 'big', 'Migration Id': 7,
            'Status': 'running', 'Kind': 'split', 'Source Host': 'src',
            'Dest Host': 'm', 'Memory Total MB': 8192,
            'Memory Processed MB': 3072, 'Memory Remaining MB': 5120,
            'Main Host': 'm', 'Sub Hosts': 'sub', 'Main Limit MB': 4096,
            'Remote MB': 4096, 'Split State': 'running'}, shown)

    def test_migration_show_of_plain_migrations(self):
        shown = self.show_migration([fake_migration(3)])
        self.assertEqual(('precopy', None, None, None),
                         (shown['Kind'], shown['Main Host'],
                          shown['Sub Hosts'], shown['Remote MB']))
        shown = self.show_migration([fake_migration(
            3, status=migration.POST_COPY_STATUS)])
        self.assertEqual('post-copy', shown['Kind'])

    def test_migration_show_of_a_split_server_at_rest(self):
        self.run_cmd(split.MigrateSplit, ['big', '--host', 'm'])
        db_api.ledger_set_state(self.ctxt, test_api.UUID, 'running')
        db_api.ledger_set_state(self.ctxt, test_api.UUID, 'done')
        shown = self.show_migration([])
        self.assertEqual((None, None, 'm', 'sub', 4096, 'done'),
                         (shown['Migration Id'], shown['Kind'],
                          shown['Main Host'], shown['Sub Hosts'],
                          shown['Remote MB'], shown['Split State']))

    def test_migration_show_without_migration_or_split(self):
        e = self.assertRaises(exceptions.CommandError, self.show_migration,
                              [])
        self.assertIn('big has no live migration in progress and does not '
                      'run split', str(e))

    def test_migration_view_of_a_mirrored_split(self):
        server = types.SimpleNamespace(id='u', name='n')
        entries = [{'main_host': 'm', 'sub_host': s, 'mb': 1024,
                    'main_limit_mb': 2048, 'state': 'running'}
                   for s in ('c', 'b')]
        view = migration.migration_view(server, [fake_migration(1)],
                                        entries)
        self.assertEqual(('split', 'b,c', 2048),
                         (view['kind'], view['sub_hosts'],
                          view['remote_mb']))

    def test_lists_follow_every_page(self):
        self.flags(group='puma_api', max_limit=1)
        for name in ('a', 'b', 'c'):
            db_api.pair_update(self.ctxt, [], [{
                'lender': name, 'borrower': name + '2', 'lender_host': 'm',
                'borrower_host': 'sub', 'capacity_mb': 512, 'key': 'k'}])
        cols, rows = self.run_cmd(pair.ListPair, [])
        self.assertEqual(['a', 'b', 'c'], [r[0] for r in rows])

    def test_pair_list(self):
        db_api.pair_update(self.ctxt, [], [{
            'lender': 'a', 'borrower': 'b', 'lender_host': 'm',
            'borrower_host': 'sub', 'capacity_mb': 512, 'key': 'k'}])
        cols, rows = self.run_cmd(pair.ListPair, [])
        self.assertEqual(('Lender', 'Borrower', 'Lender Host',
                          'Borrower Host', 'Capacity MB', 'Created At'),
                         cols)
        self.assertEqual([('a', 'b', 'm', 'sub', 512)],
                         [r[:5] for r in rows])

    def test_host_list_shows_what_merging_and_caching_save(self):
        self.flags(group='puma_api', max_limit=1)
        # m and sub reported in setUp; m again, with KSM and exclusive
        # caching.
        db_api.host_report(self.ctxt, 'm',
                           dict(base.stats(4608), merged_mb=700,
                                cache_saved_mb=90))
        cols, rows = self.run_cmd(host.ListHost, [])
        self.assertEqual(('Name', 'Address', 'Memory MB', 'Free MB',
                          'Lendable MB', 'Merged MB', 'Cache Saved MB',
                          'Shoot4u', 'Split', 'Updated At'), cols)
        self.assertEqual([('m', 4608, 700, 90), ('sub', 9000, 0, 0)],
                         [(r[0], r[3], r[5], r[6]) for r in rows])

    def test_host_list_names_an_api_older_than_1_3(self):
        with mock.patch('puma_nova.api.microversion.MAX_VERSION', (1, 2)):
            e = self.assertRaises(exceptions.CommandError, self.run_cmd,
                                  host.ListHost, [])
        self.assertIn('puma-api answered 406: version 1.3 of the '
                      'memory-pool API is not supported', str(e))

    def test_api_errors_become_command_errors(self):
        e = self.assertRaises(exceptions.CommandError, self.run_cmd,
                              split.MigrateSplit, ['nope'])
        self.assertIn('puma-api answered 404: server nope not found',
                      str(e))

    def test_make_client(self):
        instance = types.SimpleNamespace(
            _api_version={'puma': '1'}, session=ks_session.Session(),
            interface='public', region_name='r1',
            _cli_options=types.SimpleNamespace(puma_endpoint='http://x'))
        c = plugin.make_client(instance)
        self.assertEqual('http://x', c.http.endpoint_override)
        self.assertEqual('memory-pool', c.http.service_type)
