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
discovery, servers by ID and by name, flavors, and the os-migrateLive
action, which it records (or refuses, for locked servers).
"""

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


class TestSDKNovaClient(base.TestCase):

    def setUp(self):
        super().setUp()
        FakeNovaAPI.servers = {SERVER_ID: {
            'id': SERVER_ID, 'name': 'big', 'status': 'ACTIVE',
            'tenant_id': 'p1', 'OS-EXT-SRV-ATTR:host': 'src',
            'flavor': {'id': 'f1'}}}
        FakeNovaAPI.flavors = {'f1': {'id': 'f1', 'name': 'large',
                                      'ram': 8192}}
        FakeNovaAPI.actions = []
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
