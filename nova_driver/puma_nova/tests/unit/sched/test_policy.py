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


class FakeScheduler(object):
    """No ledger entries: release_entry answers as the scheduler would."""

    def release_entry(self, ctxt, entry_id):
        raise messaging.RemoteError('LedgerNotFound',
                                    'no ledger entry %d' % entry_id)


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
        # Behind auth_token: the headers a validated token leaves.
        self.app = webtest.TestApp(middleware.FaultWrapper(
            middleware.ContextMiddleware(app.APIRouter(
                v1.Controller(FakeScheduler(), self.nova)))))

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
        for roles in ('member', 'reader', 'member,reader'):
            for method, path, body in REQUESTS:
                resp = self.request(method, path, body, headers(roles), 403)
                self.assertEqual(403, resp.json['error']['code'],
                                 (roles, method, path))
        self.assertEqual([], self.nova.migrations)
        # Refused before the body is read.
        self.app.post('/v1/split-migrations', 'not json',
                      content_type='application/json',
                      headers=headers('member'), status=403)

    def test_admin_is_allowed(self):
        resp = self.app.get('/v1/ledger', headers=headers('member,admin'))
        self.assertEqual([], resp.json['ledger'])
        # Authorized, then refused for what it asks: no such entry.
        self.app.post('/v1/ledger/1/release',
                      headers=headers('admin'), status=404)

    def test_operator_allows_a_reader_with_a_policy_file(self):
        self.policy_file('"puma:ledger:list": "role:reader"\n'
                         '"puma:host:list": "role:reader"\n')
        reader = headers('reader')
        self.assertEqual([], self.app.get('/v1/ledger',
                                          headers=reader).json['ledger'])
        self.assertEqual([], self.app.get('/v1/hosts',
                                          headers=reader).json['hosts'])
        # Rules the file leaves alone keep their defaults.
        self.app.get('/v1/pairs', headers=reader, status=403)
        self.app.post('/v1/ledger/1/release', headers=reader, status=403)

    def test_operator_can_refuse_an_admin_with_a_policy_file(self):
        self.policy_file('"puma:split_migration:create": "!"\n')
        resp = self.app.post_json('/v1/split-migrations', {'server': 'big'},
                                  headers=headers('admin'), status=403)
        self.assertEqual(403, resp.json['error']['code'])
        self.assertEqual([], self.nova.migrations)
        self.app.get('/v1/ledger', headers=headers('admin'), status=200)

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
