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
"""puma-api: routing, validation, errors and the split-migration flow."""

import fixtures
from keystoneauth1 import exceptions as ks_exc
import oslo_messaging as messaging
from oslo_serialization import jsonutils
import webtest

from puma_nova.api import app
from puma_nova.api import middleware
from puma_nova.api import nova
from puma_nova.api import v1
from puma_nova.db import api as db_api
from puma_nova import exception
from puma_nova.tests.unit.sched import base

UUID = '8f0a3c52-3a36-4c38-9d2b-5f5b1c9a0001'
V1_1 = {'OpenStack-API-Version': 'memory-pool 1.1'}


class FakeNova(nova.NovaClient):
    """Servers in a dict; live migrations recorded (or refused)."""

    def __init__(self):
        self.servers = {}
        self.migrations = []
        self.refuse = None
        self.fail = None

    def get_server(self, server):
        for s in self.servers.values():
            if server in (s['id'], s['name']):
                return dict(s)
        return None

    def live_migrate(self, server_id, host):
        if self.refuse:
            raise exception.NovaError(self.refuse)
        if self.fail:
            raise self.fail
        self.migrations.append((server_id, host))

    def live_migrations(self, server_id):
        return []


class TestAPI(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(base.PolicyFixture())
        self.flags(group='puma_api', auth_strategy='noauth')
        self.flags(group='puma_scheduler', planning_interval=3600,
                   host_racks={'m': 'r1', 'near': 'r1'})
        # Computes answer stop_memory_server (release_entry) at once.
        self.rpc = self.useFixture(base.RPCFixture(
            compute_hosts=('src', 'm', 'near', 'far')))
        self.nova = FakeNova()
        self.nova.servers[UUID] = {
            'id': UUID, 'name': 'big', 'host': 'src', 'status': 'ACTIVE',
            'memory_mb': 8192, 'project_id': 'p1'}
        self.app = webtest.TestApp(app.build_app(self.rpc.api, self.nova))
        sched = self.rpc.api
        sched.report_host(self.ctxt, 'src', base.stats(
            1000, [base.vm(UUID, memory_mb=8192)]))
        sched.report_host(self.ctxt, 'm', base.stats(4608))
        sched.report_host(self.ctxt, 'near', base.stats(6000))

    def post(self, body, status, content_type='application/json'):
        if not isinstance(body, (str, bytes)):
            body = jsonutils.dumps(body)
        return self.app.post('/v1/split-migrations', body,
                             content_type=content_type, status=status)

    def assertError(self, resp, code, text):
        err = resp.json['error']
        self.assertEqual(code, err['code'])
        self.assertIn(text, err['message'])

    def test_versions(self):
        self.assertEqual('v1', self.app.get('/').json['versions'][0]['id'])

    def test_split_migration_plans_then_asks_nova(self):
        resp = self.post({'server': 'big', 'host': 'm'}, 202)
        self.assertEqual({'server': UUID, 'main_host': 'm',
                          'sub_host': 'near', 'main_limit_mb': 4096,
                          'remote_mb': 4096, 'state': 'planned'},
                         resp.json['split_migration'])
        self.assertEqual([(UUID, 'm')], self.nova.migrations)
        ledger = self.app.get('/v1/ledger?server=%s' % UUID).json['ledger']
        self.assertEqual([('m', 'near', 4096, 'planned')],
                         [(e['main_host'], e['sub_host'], e['mb'],
                           e['state']) for e in ledger])
        ms = self.app.get('/v1/memory-servers?host=near').json
        self.assertEqual([(UUID, 4096, 'reserved')],
                         [(m['instance_uuid'], m['size_mb'], m['state'])
                          for m in ms['memory_servers']])

    def test_the_servers_host_is_never_its_sub_host(self):
        # Nova says the server runs on 'near' (just moved there); no
        # report lists it there yet.
        self.nova.servers[UUID]['host'] = 'near'
        self.flags(group='puma_scheduler',
                   host_racks={'m': 'r1', 'near': 'r1', 'far': 'r1'})
        self.rpc.api.report_host(self.ctxt, 'far', base.stats(5000))
        resp = self.post({'server': UUID, 'host': 'm'}, 202)
        self.assertEqual('far', resp.json['split_migration']['sub_host'])

    def test_main_host_is_picked_when_not_given(self):
        resp = self.post({'server': UUID}, 202)
        # 'near' has the most free memory and is not the source.
        self.assertEqual('near', resp.json['split_migration']['main_host'])

    def test_nova_refusal_releases_the_ledger(self):
        self.nova.refuse = 'host m is disabled'
        resp = self.post({'server': UUID, 'host': 'm'}, 502)
        self.assertError(resp, 502, 'host m is disabled')
        self.assertEqual(['released'], [e['state'] for e in
                                        db_api.ledger_list(self.ctxt)])

    def test_nova_refusal_releases_only_the_new_plan(self):
        # The server already runs split from its host, src: a refused
        # move gives back what this request planned, not that split.
        db_api.ledger_create(self.ctxt, UUID, 'p1', 'src', 'far', 2048,
                             6144)
        db_api.ledger_set_state(self.ctxt, UUID, 'running')
        db_api.ledger_set_state(self.ctxt, UUID, 'done')
        self.nova.refuse = 'no such host m'
        self.post({'server': UUID, 'host': 'm'}, 502)
        self.assertEqual([('src', 'done'), ('m', 'released')],
                         [(e['main_host'], e['state'])
                          for e in db_api.ledger_list(self.ctxt)])

    def test_nova_refusal_keeps_a_plan_made_by_someone_else(self):
        # The destination planned this split for a migration Nova runs;
        # a second request for the same move is refused by Nova.
        self.rpc.api.plan_split(self.ctxt, UUID, 8192, 'm', 'p1')
        self.nova.refuse = 'server is migrating'
        self.post({'server': UUID, 'host': 'm'}, 502)
        self.assertEqual([('m', 'planned')],
                         [(e['main_host'], e['state'])
                          for e in db_api.ledger_list(self.ctxt)])

    def test_plan_timeout_releases_the_plan_made_all_the_same(self):
        plan_split = self.rpc.api.plan_split

        def late(*args, **kwargs):
            plan_split(*args, **kwargs)
            raise messaging.MessagingTimeout('late')

        self.useFixture(fixtures.MockPatchObject(
            self.rpc.api, 'plan_split', side_effect=late))
        resp = self.post({'server': UUID, 'host': 'm'}, 500)
        self.assertError(resp, 500, 'did not answer in time')
        self.assertEqual(['released'], [e['state'] for e in
                                        db_api.ledger_list(self.ctxt)])
        self.assertEqual([], self.nova.migrations)

    def test_nova_unreachable_releases_the_plan(self):
        self.nova.fail = ks_exc.ConnectFailure('Nova is down')
        resp = self.post({'server': UUID, 'host': 'm'}, 502)
        self.assertError(resp, 502, 'Nova is down')
        self.assertEqual(['released'], [e['state'] for e in
                                        db_api.ledger_list(self.ctxt)])

    def test_failed_release_keeps_novas_answer(self):
        # The scheduler's expiry releases the plan later.
        self.useFixture(fixtures.MockPatchObject(
            self.rpc.api, 'release_entry',
            side_effect=messaging.MessagingTimeout('no answer')))
        self.nova.refuse = 'host m is disabled'
        resp = self.post({'server': UUID, 'host': 'm'}, 502)
        self.assertError(resp, 502, 'host m is disabled')
        self.assertEqual(['planned'], [e['state'] for e in
                                       db_api.ledger_list(self.ctxt)])

    def test_stale_plans_listed_and_released(self):
        self.post({'server': 'big', 'host': 'm'}, 202)
        self.assertEqual([], self.app.get('/v1/ledger?stale=true').json[
            'ledger'])
        # Nova failed the migration before the destination took it.
        base.age_ledger(
            self.conf.conf.puma_scheduler.plan_ttl + 1)
        (entry,) = self.app.get('/v1/ledger?stale=true').json['ledger']
        self.assertEqual((UUID, 'm', 'planned'), (
            entry['instance_uuid'], entry['main_host'], entry['state']))
        resp = self.app.post('/v1/ledger/%d/release' % entry['id'])
        self.assertEqual('released', resp.json['ledger_entry']['state'])
        self.assertEqual([], self.app.get('/v1/ledger?stale=true').json[
            'ledger'])
        self.assertEqual([], self.app.get('/v1/ledger?active=true').json[
            'ledger'])
        # Again: nothing to do.
        self.app.post('/v1/ledger/%d/release' % entry['id'], status=200)

    def test_release_refused(self):
        self.post({'server': 'big', 'host': 'm'}, 202)
        (entry,) = self.app.get('/v1/ledger').json['ledger']
        self.rpc.api.split_state(self.ctxt, UUID, 'running')
        resp = self.app.post('/v1/ledger/%d/release' % entry['id'],
                             status=409)
        self.assertError(resp, 409, 'the split is in use')
        self.assertError(self.app.post('/v1/ledger/999/release',
                                       status=404), 404, 'no ledger entry')
        self.assertError(self.app.post('/v1/ledger/x/release',
                                       status=404), 404, 'no resource')
        self.assertError(self.app.get('/v1/ledger/%d/release' % entry['id'],
                                      status=405), 405, 'GET')
        self.assertEqual(['running'], [e['state'] for e in
                                       db_api.ledger_list(self.ctxt)])

    def test_bad_requests(self):
        cases = [
            ({'host': 'm'}, 400, "'server' is a required property"),
            ({'server': UUID, 'hots': 'm'}, 400, 'Additional properties'),
            ({'server': UUID, 'host': 'a b'}, 400, 'at host'),
            ({'server': 42}, 400, 'at server'),
            ('{"server": ', 400, 'not JSON'),
            ([1], 400, 'is not of type'),
        ]
        for body, code, text in cases:
            self.assertError(self.post(body, code), code, text)
        self.assertError(self.post('server=x', 400,
                                   content_type='text/plain'),
                         400, 'application/json')
        big = jsonutils.dumps({'server': 'x' * (app.MAX_BODY + 1)})
        self.assertError(self.post(big, 413), 413, 'larger than')
        self.assertEqual([], self.nova.migrations)
        self.assertEqual([], db_api.ledger_list(self.ctxt))

    def test_unknown_server_inactive_server_and_impossible_plan(self):
        self.assertError(self.post({'server': 'nope'}, 404), 404,
                         'server nope not found')
        self.assertError(self.post({'server': UUID, 'host': 'src'}, 409),
                         409, 'already runs on src')
        self.assertError(self.post({'server': UUID, 'host': 'mars'}, 409),
                         409, 'unknown host mars')
        self.nova.servers[UUID]['status'] = 'SHUTOFF'
        self.assertError(self.post({'server': UUID}, 409), 409, 'SHUTOFF')
        self.assertEqual([], self.nova.migrations)

    def test_routing_errors(self):
        self.assertError(self.app.get('/v1/nothing', status=404), 404,
                         '/v1/nothing')
        self.assertError(self.app.delete('/v1/pairs', status=405), 405,
                         'DELETE')
        self.assertError(self.app.get('/v1/ledger?active=yes', status=400),
                         400, 'at active')
        self.assertError(self.app.get('/v1/pairs?x=1', status=400), 400,
                         'Additional properties')

    def test_lists(self):
        hosts = self.app.get('/v1/hosts').json['hosts']
        self.assertEqual(['m', 'near', 'src'], [h['name'] for h in hosts])
        self.assertEqual([], self.app.get('/v1/pairs').json['pairs'])
        db_api.pair_update(self.ctxt, [], [{
            'lender': 'a', 'borrower': 'b', 'lender_host': 'm',
            'borrower_host': 'near', 'capacity_mb': 512, 'key': 'secret'}])
        pairs = self.app.get('/v1/pairs').json['pairs']
        self.assertEqual(512, pairs[0]['capacity_mb'])
        self.assertNotIn('key', pairs[0])

    def test_hosts_show_merged_mb_since_1_2(self):
        db_api.host_report(self.ctxt, 'm',
                           dict(base.stats(4608), merged_mb=700))
        for version, shown in ((None, None), ('1.1', None),
                               ('1.2', {'m': 700, 'near': 0, 'src': 0})):
            headers = ({'OpenStack-API-Version': 'memory-pool ' + version}
                       if version else {})
            hosts = self.app.get('/v1/hosts', headers=headers).json['hosts']
            if shown is None:
                self.assertNotIn('merged_mb', hosts[0], version)
            else:
                self.assertEqual(shown, {h['name']: h['merged_mb']
                                         for h in hosts})

    def test_hosts_show_cache_saved_mb_since_1_3(self):
        db_api.host_report(self.ctxt, 'm', dict(
            base.stats(4608), merged_mb=700, cache_saved_mb=90))
        for version, shown in ((None, None), ('1.2', None),
                               ('1.3', {'m': 90, 'near': 0, 'src': 0})):
            headers = ({'OpenStack-API-Version': 'memory-pool ' + version}
                       if version else {})
            hosts = self.app.get('/v1/hosts', headers=headers).json['hosts']
            if shown is None:
                self.assertNotIn('cache_saved_mb', hosts[0], version)
            else:
                self.assertEqual(shown, {h['name']: h['cache_saved_mb']
                                         for h in hosts})
                self.assertEqual(700, hosts[0]['merged_mb'])

    def test_pages_follow_markers_to_the_end(self):
        body = self.app.get('/v1/hosts?limit=2', headers=V1_1).json
        self.assertEqual(['m', 'near'], [h['name'] for h in body['hosts']])
        (link,) = body['hosts_links']
        self.assertEqual('next', link['rel'])
        self.assertEqual('http://localhost/v1/hosts?limit=2&marker=near',
                         link['href'])
        body = self.app.get(link['href'], headers=V1_1).json
        self.assertEqual(['src'], [h['name'] for h in body['hosts']])
        self.assertNotIn('hosts_links', body)
        # Filters stay in the next link.
        for i in range(3):
            db_api.ledger_create(self.ctxt, 'vm%d' % i, 'p1', 'm', 'near',
                                 512, 512)
        body = self.app.get('/v1/ledger?host=near&limit=1',
                            headers=V1_1).json
        href = body['ledger_links'][0]['href']
        self.assertIn('host=near', href)
        ids = [e['id'] for e in body['ledger']]
        while 'ledger_links' in body:
            body = self.app.get(body['ledger_links'][0]['href'],
                                headers=V1_1).json
            ids += [e['id'] for e in body['ledger']]
        self.assertEqual(sorted(ids), ids)
        self.assertEqual(3, len(set(ids)))

    def test_max_limit_pages_instead_of_cutting(self):
        # 1.0, as before 1.1: the first max_limit rows, no paging.
        self.flags(group='puma_api', max_limit=2)
        body = self.app.get('/v1/hosts').json
        self.assertEqual(['hosts'], list(body))
        self.assertEqual(2, len(body['hosts']))
        r = self.app.get('/v1/hosts?limit=1', status=400)
        self.assertIn('microversion 1.1', r.json['error']['message'])
        # 1.1: pages instead of a silent cut.
        body = self.app.get('/v1/hosts', headers=V1_1).json
        self.assertEqual(2, len(body['hosts']))
        self.assertIn('hosts_links', body)
        body = self.app.get('/v1/hosts?limit=50', headers=V1_1).json
        self.assertEqual(2, len(body['hosts']))
        self.assertIn('limit=2', body['hosts_links'][0]['href'])

    def test_bad_pages(self):
        for query in ('limit=0', 'limit=x', 'limit=-1', 'marker=',
                      'marker=nosuchhost'):
            r = self.app.get('/v1/hosts?' + query, status=400, headers=V1_1)
            self.assertIn('invalid' if 'nosuch' not in query else
                          'marker nosuchhost not found',
                          r.json['error']['message'], query)

    def test_microversions(self):
        r = self.app.get('/v1/hosts')
        self.assertEqual('memory-pool 1.0',
                         r.headers['OpenStack-API-Version'])
        self.assertIn('OpenStack-API-Version', r.headers['Vary'])
        for asked, answered in (('memory-pool 1.1', '1.1'),
                                ('memory-pool latest', '1.3'),
                                ('compute 2.90, memory-pool 1.0', '1.0')):
            r = self.app.get('/v1/hosts',
                             headers={'OpenStack-API-Version': asked})
            self.assertEqual('memory-pool ' + answered,
                             r.headers['OpenStack-API-Version'], asked)
        r = self.app.get('/v1/hosts', status=406,
                         headers={'OpenStack-API-Version': 'memory-pool 1.9'})
        self.assertIn('serves 1.0 to 1.3', r.json['error']['message'])
        for bad in ('memory-pool 1', 'memory-pool 1.01', 'memory-pool x'):
            self.app.get('/v1/hosts', status=400,
                         headers={'OpenStack-API-Version': bad})
        (v1_doc,) = self.app.get('/').json['versions']
        self.assertEqual(('1.0', '1.3'), (v1_doc['min_version'],
                                          v1_doc['version']))


class TestAPIAuth(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(base.PolicyFixture())

    def _app(self):
        return webtest.TestApp(app.build_app(object(), FakeNova()))

    def test_keystone_pipeline_rejects_anonymous(self):
        self.flags(group='puma_api', auth_strategy='keystone')
        self.flags(group='keystone_authtoken',
                   www_authenticate_uri='http://keystone.invalid/identity')
        resp = self._app().get('/v1/hosts', status=401)
        self.assertIn('keystone.invalid', resp.headers['WWW-Authenticate'])

    def test_role_is_required(self):
        # What auth_token leaves in the environment for a valid token.
        self.flags(group='puma_api', auth_strategy='keystone')
        inner = webtest.TestApp(middleware.FaultWrapper(
            middleware.ContextMiddleware(app.APIRouter(
                v1.Controller(None, None)))))
        headers = {'X-Identity-Status': 'Confirmed', 'X-Roles': 'member',
                   'X-Project-Id': 'p1', 'X-User-Id': 'u1'}
        resp = inner.get('/v1/hosts', headers=headers, status=403)
        self.assertIn('policy does not allow puma:host:list',
                      resp.json['error']['message'])
        headers['X-Roles'] = 'member,admin'
        self.assertEqual([], inner.get('/v1/hosts',
                                       headers=headers).json['hosts'])

    def test_healthcheck_without_a_token(self):
        # Load balancers ask without credentials; the API itself still
        # wants a token.
        self.flags(group='puma_api', auth_strategy='keystone')
        self.flags(group='keystone_authtoken',
                   www_authenticate_uri='http://keystone.invalid/identity')
        api = self._app()
        api.get('/healthcheck', status=200)
        api.get('/v1/hosts', status=401)

    def test_every_answer_has_a_request_id(self):
        self.flags(group='puma_api', auth_strategy='noauth')
        api = self._app()
        for path, status in (('/v1', 200), ('/v1/nothing', 404)):
            resp = api.get(path, status=status)
            self.assertTrue(resp.headers['x-openstack-request-id']
                            .startswith('req-'), resp.headers)

    def test_cors_preflight_for_an_allowed_origin(self):
        self.flags(group='puma_api', auth_strategy='noauth')
        self.flags(group='cors', allowed_origin=['https://dash.example'])
        resp = self._app().options('/v1/hosts', headers={
            'Origin': 'https://dash.example',
            'Access-Control-Request-Method': 'GET'})
        self.assertEqual('https://dash.example',
                         resp.headers['Access-Control-Allow-Origin'])
        resp = self._app().options('/v1/hosts', headers={
            'Origin': 'https://evil.example',
            'Access-Control-Request-Method': 'GET'}, status='*')
        self.assertNotIn('Access-Control-Allow-Origin', resp.headers)
