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
"""puma-api authorization: oslo.policy defaults and operator overrides."""

import os

import fixtures
import oslo_messaging as messaging
from oslo_policy import generator
from oslo_policy import opts as policy_opts
from oslo_policy import policy as oslo_policy
from oslo_serialization import jsonutils
import testtools
import webob
import webob.dec
import webtest

import puma_nova
from puma_nova.api import app
from puma_nova.api import middleware
from puma_nova.api import v1
from puma_nova.db import api as db_api
from puma_nova import policies
from puma_nova import policy
from puma_nova.tests.unit.sched import base
from puma_nova.tests.unit.sched import test_api

# (method, path, body) of every v1 resource.
REQUESTS = (
    ('GET', '/v1/hosts', None),
    ('GET', '/v1/pairs', None),
    ('GET', '/v1/memory-servers', None),
    ('GET', '/v1/ledger', None),
    ('POST', '/v1/ledger/1/release', None),
    ('POST', '/v1/split-migrations', {'server': 'big'}),
)


# Servers of two projects, as Nova shows them to puma-api.
P1_SERVER = '8f0a3c52-3a36-4c38-9d2b-5f5b1c9a0101'
P2_SERVER = '8f0a3c52-3a36-4c38-9d2b-5f5b1c9a0202'

# The example of docs/nova-scheduler.md: members split-migrate the
# servers of their own project.
MEMBERS_SPLIT_OWN = ('"puma:split_migration:create": "rule:admin_api or '
                     '(role:member and project_id:%(project_id)s)"\n')


class FakeScheduler(object):
    """Answers as the scheduler would, and records what it was asked."""

    def __init__(self):
        self.released = []
        self.planned = []

    def release_entry(self, ctxt, entry_id):
        try:
            db_api.ledger_get(ctxt, entry_id)
        except Exception:
            raise messaging.RemoteError('LedgerNotFound',
                                        'no ledger entry %d' % entry_id)
        self.released.append(entry_id)

    def plan_split(self, ctxt, server_id, memory_mb, main_host, project_id,
                   source_host=None):
        self.planned.append((server_id, main_host, project_id))
        return {'sub_host': 'near', 'main_limit_mb': 4096,
                'remote_mb': memory_mb - 4096}


def headers(roles, project='p1', **extra):
    """What auth_token leaves in the environment for a valid token."""
    h = {'X-Identity-Status': 'Confirmed', 'X-Roles': roles,
         'X-User-Id': 'u1'}
    if project:
        h['X-Project-Id'] = project
    h.update(extra)
    return h


class TestPolicy(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(base.PolicyFixture())
        # The [oslo_policy] options, as the enforcer registers them.
        policy_opts.set_defaults(self.conf.conf)
        self.flags(group='puma_api', auth_strategy='keystone')
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.nova = test_api.FakeNova()
        self.scheduler = FakeScheduler()
        # Behind auth_token: the headers a validated token leaves.
        self.app = webtest.TestApp(middleware.FaultWrapper(
            middleware.ContextMiddleware(app.APIRouter(
                v1.Controller(self.scheduler, self.nova)))))

    def add_servers(self):
        """Server 'big' of project p1 and 'other' of project p2."""
        for uuid, name, project in ((P1_SERVER, 'big', 'p1'),
                                    (P2_SERVER, 'other', 'p2')):
            self.nova.servers[uuid] = {
                'id': uuid, 'name': name, 'host': 'src',
                'status': 'ACTIVE', 'memory_mb': 8192,
                'project_id': project}

    def add_entries(self):
        """Planned ledger entries: (id of p1's, id of p2's)."""
        return tuple(db_api.ledger_create(
            self.ctxt, uuid, project, 'm', 'near', 4096, 4096)['id']
            for uuid, project in ((P1_SERVER, 'p1'), (P2_SERVER, 'p2')))

    def split_migrate(self, server, hdrs, status):
        return self.app.post_json('/v1/split-migrations',
                                  {'server': server, 'host': 'm'},
                                  headers=hdrs, status=status)

    def policy_file(self, text):
        path = os.path.join(self.tmp, 'policy.yaml')
        with open(path, 'w') as f:
            f.write(text)
        self.flags(group='oslo_policy', policy_file=path)

    def request(self, method, path, body, hdrs, status):
        if body is None:
            return self.app.request(path, method=method, headers=hdrs,
                                    status=status)
        return self.app.request(path, method=method, headers=hdrs,
                                body=jsonutils.dump_as_bytes(body),
                                content_type='application/json',
                                status=status)

    def test_non_admin_is_refused_everywhere(self):
        # Server 'big' and ledger entry 1 are of the callers' project.
        self.add_servers()
        self.add_entries()
        for roles in ('member', 'reader', 'member,reader'):
            for method, path, body in REQUESTS:
                resp = self.request(method, path, body, headers(roles), 403)
                self.assertEqual(403, resp.json['error']['code'],
                                 (roles, method, path))
        self.assertEqual([], self.nova.migrations)
        self.assertEqual([], self.scheduler.released)
        # The target of a split migration is the server's project, named
        # in the body: as in Nova, the body is validated first.
        self.app.post('/v1/split-migrations', 'not json',
                      content_type='application/json',
                      headers=headers('member'), status=400)

    def test_admin_is_allowed(self):
        resp = self.app.get('/v1/ledger', headers=headers('member,admin'))
        self.assertEqual([], resp.json['ledger'])
        # Authorized, then refused for what it asks: no such entry.
        self.app.post('/v1/ledger/1/release',
                      headers=headers('admin'), status=404)

    def test_operator_allows_a_reader_with_a_policy_file(self):
        entries = self.add_entries()
        self.policy_file('"puma:ledger:list": "role:reader"\n'
                         '"puma:host:list": "role:reader"\n')
        reader = headers('reader')
        # The whole ledger: every project's entries.
        self.assertEqual(list(entries), [e['id'] for e in self.app.get(
            '/v1/ledger', headers=reader).json['ledger']])
        self.assertEqual([], self.app.get('/v1/hosts',
                                          headers=reader).json['hosts'])
        # Rules the file leaves alone keep their defaults.
        self.app.get('/v1/pairs', headers=reader, status=403)
        self.app.post('/v1/ledger/1/release', headers=reader, status=403)

    def test_operator_can_refuse_an_admin_with_a_policy_file(self):
        self.add_servers()
        self.policy_file('"puma:split_migration:create": "!"\n')
        resp = self.app.post_json('/v1/split-migrations', {'server': 'big'},
                                  headers=headers('admin'), status=403)
        self.assertEqual(403, resp.json['error']['code'])
        self.assertEqual([], self.nova.migrations)
        self.app.get('/v1/ledger', headers=headers('admin'), status=200)

    def test_member_may_split_migrate_own_servers_with_example_rule(self):
        self.add_servers()
        self.policy_file(MEMBERS_SPLIT_OWN)
        member = headers('member', project='p1')
        resp = self.split_migrate(P1_SERVER, member, 202)
        self.assertEqual(P1_SERVER, resp.json['split_migration']['server'])
        self.split_migrate('big', member, 202)
        # Another project's server, by ID or by name: as if it did not
        # exist (Nova's 404 for a server a caller may not see).
        for server in (P2_SERVER, 'other'):
            resp = self.split_migrate(server, member, 404)
            self.assertEqual('server %s not found' % server,
                             resp.json['error']['message'])
        self.split_migrate('nope', member, 404)
        # A reader of p1 is not a member.
        self.split_migrate(P1_SERVER, headers('reader', project='p1'), 403)
        self.assertEqual([(P1_SERVER, 'm'), (P1_SERVER, 'm')],
                         self.nova.migrations)
        self.assertEqual([(P1_SERVER, 'm', 'p1')] * 2,
                         self.scheduler.planned)

    def test_member_rule_with_the_project_member_base_rule(self):
        self.add_servers()
        self.policy_file('"puma:split_migration:create": '
                         '"rule:project_member_or_admin"\n')
        self.split_migrate(P2_SERVER, headers('member', project='p2'), 202)
        self.split_migrate(P1_SERVER, headers('member', project='p2'), 404)
        self.split_migrate(P1_SERVER, headers('admin', project='p3'), 202)
        self.assertEqual([(P2_SERVER, 'm'), (P1_SERVER, 'm')],
                         self.nova.migrations)

    def test_split_migration_target_is_the_servers_project(self):
        # An admin sees every server; the rule decides on the server's
        # project, not the admin's.
        self.add_servers()
        # A literal on the left compares with the target.
        self.policy_file('"puma:split_migration:create": '
                         '"\'p2\':%(project_id)s"\n')
        admin = headers('admin', project='p1')
        self.split_migrate(P1_SERVER, admin, 403)
        self.split_migrate(P2_SERVER, admin, 202)
        self.assertEqual([(P2_SERVER, 'm')], self.nova.migrations)

    def test_default_rules_refuse_members_their_own_resources(self):
        self.add_servers()
        p1_entry, p2_entry = self.add_entries()
        for roles in ('member', 'reader', 'member,reader'):
            hdrs = headers(roles, project='p1')
            resp = self.split_migrate(P1_SERVER, hdrs, 403)
            self.assertEqual('policy does not allow '
                             'puma:split_migration:create',
                             resp.json['error']['message'])
            self.split_migrate(P2_SERVER, hdrs, 404)
            self.app.post('/v1/ledger/%d/release' % p1_entry,
                          headers=hdrs, status=403)
            self.app.post('/v1/ledger/%d/release' % p2_entry,
                          headers=hdrs, status=404)
            self.app.get('/v1/ledger', headers=hdrs, status=403)
        self.assertEqual([], self.nova.migrations)
        self.assertEqual([], self.scheduler.released)
        # Admin (of any project) still does everything.
        admin = headers('admin', project='p3')
        self.split_migrate(P1_SERVER, admin, 202)
        self.split_migrate(P2_SERVER, admin, 202)
        for entry in (p1_entry, p2_entry):
            self.app.post('/v1/ledger/%d/release' % entry, headers=admin)
        self.assertEqual([p1_entry, p2_entry], self.scheduler.released)
        self.assertEqual(2, len(self.app.get(
            '/v1/ledger', headers=admin).json['ledger']))

    def test_ledger_release_target_is_the_entrys_project(self):
        p1_entry, p2_entry = self.add_entries()
        self.policy_file('"puma:ledger:release": "\'p2\':%(project_id)s"\n')
        admin = headers('admin', project='p1')
        self.app.post('/v1/ledger/%d/release' % p1_entry, headers=admin,
                      status=403)
        resp = self.app.post('/v1/ledger/%d/release' % p2_entry,
                             headers=admin)
        self.assertEqual('p2', resp.json['ledger_entry']['project_id'])
        self.assertEqual([p2_entry], self.scheduler.released)

    def test_members_may_release_their_projects_entries(self):
        p1_entry, p2_entry = self.add_entries()
        self.policy_file('"puma:ledger:release": "rule:admin_api or '
                         '(role:member and project_id:%(project_id)s)"\n')
        member = headers('member', project='p1')
        resp = self.app.post('/v1/ledger/%d/release' % p1_entry,
                             headers=member)
        self.assertEqual(p1_entry, resp.json['ledger_entry']['id'])
        # Another project's entry: as if it did not exist.
        resp = self.app.post('/v1/ledger/%d/release' % p2_entry,
                             headers=member, status=404)
        self.assertEqual('no ledger entry %d' % p2_entry,
                         resp.json['error']['message'])
        self.app.post('/v1/ledger/999/release', headers=member, status=404)
        self.assertEqual([p1_entry], self.scheduler.released)

    def test_ledger_of_the_callers_project(self):
        p1_entry, p2_entry = self.add_entries()
        self.policy_file('"puma:ledger:list:project": '
                         '"rule:project_reader_or_admin"\n')
        reader = headers('reader', project='p1')
        self.assertEqual([p1_entry], [e['id'] for e in self.app.get(
            '/v1/ledger', headers=reader).json['ledger']])
        self.assertEqual([p2_entry], [e['id'] for e in self.app.get(
            '/v1/ledger', headers=headers('reader', project='p2'))
            .json['ledger']])
        self.assertEqual([], self.app.get(
            '/v1/ledger?server=%s' % P2_SERVER,
            headers=reader).json['ledger'])
        # The whole ledger stays with puma:ledger:list (admin).
        self.assertEqual([p1_entry, p2_entry], [e['id'] for e in self.app.get(
            '/v1/ledger', headers=headers('admin', project='p1'))
            .json['ledger']])
        self.app.get('/v1/ledger', headers=headers('member', project='p1'),
                     status=403)

    def test_system_scoped_token_is_refused(self):
        # Project scope, as Nova and Placement: the cloud admin holds a
        # project-scoped token with the admin role.
        resp = self.app.get('/v1/hosts', headers=headers(
            'admin', project=None, **{'OpenStack-System-Scope': 'all'}),
            status=403)
        self.assertIn('scope', resp.json['error']['message'])

    def test_is_admin_follows_context_is_admin(self):
        seen = []

        class Probe(object):
            @webob.dec.wsgify
            def __call__(self, req):
                seen.append(req.environ['puma.context'].is_admin)
                return webob.Response()

        probe = webtest.TestApp(middleware.ContextMiddleware(Probe()))
        probe.get('/', headers=headers('member'))
        probe.get('/', headers=headers('admin'))
        self.policy_file('"context_is_admin": "role:cloud-admin"\n')
        policy.reset()
        probe.get('/', headers=headers('admin'))
        probe.get('/', headers=headers('cloud-admin'))
        self.assertEqual([False, True, False, True], seen)

    def test_entry_point_enforcer_reads_the_policy_file(self):
        # What oslopolicy-policy-generator --namespace puma shows.
        self.policy_file('"puma:ledger:list": "role:reader"\n')
        enforcer = policy.get_enforcer()
        enforcer.load_rules()
        self.assertEqual('role:reader',
                         str(enforcer.rules['puma:ledger:list']))
        self.assertEqual('rule:admin_api',
                         str(enforcer.rules['puma:ledger:release']))


class TestPolicyInCode(testtools.TestCase):

    def test_every_route_has_its_documented_rule(self):
        rules = {r.name: r for r in policies.list_rules()}
        for path, method, action, _body in app.ROUTES:
            name = getattr(v1.Controller, action).policy_rule
            rule = rules[name]
            self.assertIsInstance(rule, oslo_policy.DocumentedRuleDefault)
            self.assertIn({'method': method, 'path': path},
                          rule.operations, name)
            self.assertEqual(['project'], rule.scope_types, name)
            self.assertTrue(name.startswith('puma:'), name)

    def test_rules_are_registered_once(self):
        names = [r.name for r in policies.list_rules()]
        self.assertEqual(sorted(set(names)), sorted(names))

    def test_sample_policy_file_is_current(self):
        # etc/puma-policy.yaml.sample is what `tox -e genpolicy` writes
        # from the oslo.policy.policies entry point (installed package).
        sample = os.path.join(os.path.dirname(puma_nova.__file__),
                              os.pardir, 'etc', 'puma-policy.yaml.sample')
        if not os.path.exists(sample):
            self.skipTest('no source tree')
        out = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'policy.yaml')
        generator._generate_sample(['puma'], out)
        with open(sample) as want, open(out) as got:
            self.assertEqual(want.read(), got.read(),
                             'run tox -e genpolicy')
