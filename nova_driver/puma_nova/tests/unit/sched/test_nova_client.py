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
"""SDKNovaClient against a small stateful Nova compute API on loopback.

The fake speaks just enough of Nova's API 2.1 for openstacksdk: version
discovery, servers by ID and by name, flavors, the os-migrateLive
action, which it records (or refuses, for locked servers), and the
os-migrations list with Nova's filters and microversions.
"""

import datetime

import http.server
import json
import re
import socket
import threading

from keystoneauth1 import loading as ks_loading

from puma_nova.api import nova
from puma_nova import exception
from puma_nova.tests.unit.sched import base

SERVER_ID = '4d2b1a96-7c1e-4c52-9d4f-2a4b7e6f0001'


class FakeNovaAPI(http.server.BaseHTTPRequestHandler):

    servers = {}
    flavors = {}
    actions = []
    # Nova's migration records, as its database holds them, and the
    # os-migrations requests: (query, OpenStack-API-Version).
    migrations = []
    migration_reads = []
    # The status of os-migrations answers (403: policy refused).
    migrations_code = 200

    def log_message(self, *args):
        pass

    def _send(self, code, doc=None):
        body = json.dumps(doc).encode() if doc is not None else b''
        self.send_response(code)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _version(self):
        base_url = 'http://%s:%d/v2.1/' % self.server.server_address
        return {'id': 'v2.1', 'status': 'CURRENT', 'version': '2.96',
                'min_version': '2.1',
                'links': [{'rel': 'self', 'href': base_url}]}

    def do_GET(self):
        path, _, query = self.path.partition('?')
        path = path.rstrip('/')
        if path in ('', '/'):
            return self._send(300, {'versions': [self._version()]})
        if path == '/v2.1':
            return self._send(200, {'version': self._version()})
        if path == '/v2.1/os-migrations':
            return self._migrations(query)
        m = re.fullmatch(r'/v2.1/servers/detail', path)
        if m:
            name = dict(p.split('=', 1) for p in query.split('&')
                        if '=' in p).get('name', '')
            found = [s for s in self.servers.values()
                     if re.search(name, s['name'])]
            return self._send(200, {'servers': found})
        m = re.fullmatch(r'/v2.1/servers/([^/]+)', path)
        if m and m.group(1) in self.servers:
            return self._send(200, {'server': self.servers[m.group(1)]})
        m = re.fullmatch(r'/v2.1/flavors/([^/]+)', path)
        if m and m.group(1) in self.flavors:
            return self._send(200, {'flavor': self.flavors[m.group(1)]})
        self._send(404, {'itemNotFound': {'code': 404,
                                          'message': 'no %s' % path}})

    def _migrations(self, query):
        """GET /os-migrations as Nova answers it (2.1 to 2.80)."""
        version = self.headers.get('OpenStack-API-Version') or ''
        self.migration_reads.append((query, version))
        if self.migrations_code != 200:
            return self._send(self.migrations_code, {'forbidden': {
                'code': self.migrations_code,
                'message': 'Policy doesn\'t allow '
                           'os_compute_api:os-migrations:index:all_projects '
                           'to be performed.'}})
        micro = version.split()[-1] if version else '2.1'
        since_259 = tuple(map(int, micro.split('.'))) >= (2, 59)
        filters = dict(p.split('=', 1) for p in query.split('&') if p)
        found = [dict(m) for m in self.migrations
                 if all(m.get(k) == v for k, v in filters.items()
                        if k in ('instance_uuid', 'migration_type',
                                 'status'))]
        if since_259:
            # Newest first (created_at, then id).
            found.sort(key=lambda m: (m['created_at'], m['id']),
                       reverse=True)
        else:
            for m in found:
                del m['uuid']
        return self._send(200, {'migrations': found})

    def do_POST(self):
        body = json.loads(self.rfile.read(
            int(self.headers['Content-Length'])))
        m = re.fullmatch(r'/v2.1/servers/([^/]+)/action', self.path)
        if not m or m.group(1) not in self.servers:
            return self._send(404, {'itemNotFound': {'code': 404,
                                                     'message': 'nope'}})
        if self.servers[m.group(1)].get('locked'):
            return self._send(409, {'conflictingRequest': {
                'code': 409, 'message': 'Instance is locked'}})
        self.actions.append((m.group(1), body,
                             self.headers.get('OpenStack-API-Version')))
        self._send(202)


class NovaAPICase(base.TestCase):
    """An SDKNovaClient in front of the fake Nova API."""

    def setUp(self):
        super().setUp()
        FakeNovaAPI.servers = {SERVER_ID: {
            'id': SERVER_ID, 'name': 'big', 'status': 'ACTIVE',
            'tenant_id': 'p1', 'OS-EXT-SRV-ATTR:host': 'src',
            'flavor': {'id': 'f1'}}}
        FakeNovaAPI.flavors = {'f1': {'id': 'f1', 'name': 'large',
                                      'ram': 8192}}
        FakeNovaAPI.actions = []
        FakeNovaAPI.migrations = []
        FakeNovaAPI.migration_reads = []
        FakeNovaAPI.migrations_code = 200
        httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                FakeNovaAPI)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)
        base.CONF.register_opts(
            ks_loading.get_auth_plugin_conf_options('none'), group='nova')
        self.flags(group='nova', auth_type='none',
                   endpoint='http://127.0.0.1:%d/v2.1' % httpd.server_port)
        self.nova = nova.SDKNovaClient()


class TestSDKNovaClient(NovaAPICase):

    def test_server_by_id_and_by_name(self):
        want = {'id': SERVER_ID, 'name': 'big', 'host': 'src',
                'status': 'ACTIVE', 'memory_mb': 8192, 'project_id': 'p1'}
        self.assertEqual(want, self.nova.get_server(SERVER_ID))
        self.assertEqual(want, self.nova.get_server('big'))
        self.assertIsNone(self.nova.get_server('nothing'))

    def test_embedded_flavor_of_api_2_47(self):
        FakeNovaAPI.flavors = {}
        FakeNovaAPI.servers[SERVER_ID]['flavor'] = {
            'original_name': 'large', 'ram': 4096, 'vcpus': 2, 'disk': 10}
        self.assertEqual(4096, self.nova.get_server(SERVER_ID)['memory_mb'])

    def test_live_migration_request(self):
        self.nova.live_migrate(SERVER_ID, 'main1')
        [(server, body, _version)] = FakeNovaAPI.actions
        self.assertEqual(SERVER_ID, server)
        self.assertEqual({'host': 'main1', 'block_migration': 'auto'},
                         body['os-migrateLive'])

    def test_refusal_is_a_nova_error_with_novas_message(self):
        FakeNovaAPI.servers[SERVER_ID]['locked'] = True
        e = self.assertRaises(exception.NovaError, self.nova.live_migrate,
                              SERVER_ID, 'main1')
        self.assertIn('Instance is locked', str(e))
        self.assertEqual([], FakeNovaAPI.actions)

    def test_unreachable_nova_is_a_nova_error(self):
        # Nothing listens there any more: keystoneauth's ConnectFailure,
        # which is no SDKException.
        sock = socket.socket()
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
        sock.close()
        self.flags(group='nova', endpoint='http://127.0.0.1:%d/v2.1' % port)
        e = self.assertRaises(exception.NovaError,
                              nova.SDKNovaClient().live_migrate,
                              SERVER_ID, 'main1')
        self.assertIn(SERVER_ID, str(e))


def migration(mid, status, created_at, updated_at=None,
              server=SERVER_ID, kind='live-migration'):
    """A migration record as os-migrations 2.59 returns it."""
    return {'id': mid, 'uuid': '1f0e5a3c-0000-4000-8000-%012d' % mid,
            'instance_uuid': server, 'migration_type': kind,
            'status': status, 'source_compute': 'src',
            'source_node': 'src', 'dest_compute': 'main1',
            'dest_node': 'main1', 'dest_host': None,
            'old_instance_type_id': 1, 'new_instance_type_id': 1,
            'created_at': created_at, 'updated_at': updated_at,
            'links': []}


class TestLiveMigrations(NovaAPICase):
    """NovaClient.live_migrations: what puma-scheduler reads of Nova."""

    def test_live_migrations_of_the_server_newest_first(self):
        FakeNovaAPI.migrations = [
            migration(1, 'error', '2026-08-21T10:00:00.000000',
                      '2026-08-21T10:00:03.000000'),
            # Never changed since the conductor created it.
            migration(3, 'accepted', '2026-08-21T10:05:00.000000'),
            migration(2, 'completed', '2026-08-21T10:01:00.000000',
                      '2026-08-21T10:02:00.000000', kind='migration'),
            migration(4, 'running', '2026-08-21T10:06:00.000000',
                      '2026-08-21T10:06:01.000000',
                      server='4d2b1a96-7c1e-4c52-9d4f-2a4b7e6f0002'),
        ]
        got = self.nova.live_migrations(SERVER_ID)
        self.assertEqual(
            [{'uuid': '1f0e5a3c-0000-4000-8000-000000000003',
              'status': 'accepted', 'dest_compute': 'main1',
              'created_at': datetime.datetime(2026, 8, 21, 10, 5),
              'updated_at': None},
             {'uuid': '1f0e5a3c-0000-4000-8000-000000000001',
              'status': 'error', 'dest_compute': 'main1',
              'created_at': datetime.datetime(2026, 8, 21, 10, 0),
              'updated_at': datetime.datetime(2026, 8, 21, 10, 0, 3)}],
            got)
        (query, version), = FakeNovaAPI.migration_reads
        # Filtered by Nova, at the microversion that gives uuids.
        self.assertEqual('compute 2.59', version)
        self.assertIn('instance_uuid=%s' % SERVER_ID, query)
        self.assertIn('migration_type=live-migration', query)
        self.assertNotIn('changes-since', query)

    def test_time_zones_are_normalized_to_naive_utc(self):
        FakeNovaAPI.migrations = [
            migration(1, 'failed', '2026-08-21T12:00:00+02:00',
                      '2026-08-21T10:00:05Z')]
        (got,) = self.nova.live_migrations(SERVER_ID)
        self.assertEqual(datetime.datetime(2026, 8, 21, 10, 0),
                         got['created_at'])
        self.assertEqual(datetime.datetime(2026, 8, 21, 10, 0, 5),
                         got['updated_at'])

    def test_refused_list_is_a_nova_error(self):
        FakeNovaAPI.migrations_code = 403
        e = self.assertRaises(exception.NovaError,
                              self.nova.live_migrations, SERVER_ID)
        self.assertIn('os-migrations:index:all_projects', str(e))

    def test_unreachable_nova_is_a_nova_error_for_the_list(self):
        sock = socket.socket()
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
        sock.close()
        self.flags(group='nova', endpoint='http://127.0.0.1:%d/v2.1' % port)
        e = self.assertRaises(exception.NovaError,
                              nova.SDKNovaClient().live_migrations,
                              SERVER_ID)
        self.assertIn(SERVER_ID, str(e))
