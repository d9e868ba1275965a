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

"""puma-scheduler releases the plan of a live migration Nova failed.

The real scheduler manager (its ledger in a SQLite database) replaces
the test double: the destination's driver plans with it during Nova's
checks, Nova's conductor then fails the migration (binding the ports on
the requested destination), and the manager's periodic release reads
Nova's os-migrations through SDKNovaClient ([nova] admin_token at the
in-process Nova API) and releases the plan, stopping its memory server
on the sub host over the compute RPC API.
"""

import os

import fixtures
from keystoneauth1 import loading as ks_loading
from nova.api import auth as nova_auth
import nova.conf
from nova import rpc as nova_rpc
from nova.tests.functional.api import client

from puma_nova.api import nova as nova_client
from puma_nova.compute import rpcapi
from puma_nova.conf import scheduler as sched_conf
from puma_nova import context
from puma_nova.db import api as db_api
from puma_nova.db import migration
from puma_nova.scheduler import manager
from puma_nova.tests.functional import scheduler_double
from puma_nova.tests.functional import test_split_migration as split_tests

CONF = nova.conf.CONF
GIB = split_tests.GIB


class FailedMigrationPlanReleaseTest(split_tests.PumaServersTestBase):

    def setUp(self):
        super().setUp()
        # Only what the scheduler manager and its Nova client read: the
        # rest of puma.conf ([database], [placement]) is Nova's here.
        CONF.register_opts(sched_conf.scheduler_opts,
                           group=sched_conf.scheduler_group)
        CONF.register_opts(sched_conf.nova_opts, group='nova')
        ks_loading.register_session_conf_options(CONF, 'nova')
        ks_loading.register_auth_conf_options(CONF, 'nova')
        CONF.register_opts(
            ks_loading.get_auth_plugin_conf_options('admin_token'),
            group='nova')
        self.flags(group='puma_scheduler', reserve_mb=0)
        self.flags(group='nova', auth_type='admin_token', token='admin',
                   endpoint=self.api.base_url)
        # Nova's keystone stub reads the test client's headers; a token
        # alone (keystoneauth's admin_token) is the admin.
        stub = nova_auth.NovaKeystoneContext._create_context

        def token_context(env, **kwargs):
            if 'HTTP_X_AUTH_USER' not in env:
                env = dict(env, HTTP_X_AUTH_USER='admin',
                           HTTP_X_AUTH_PROJECT_ID='puma',
                           HTTP_X_ROLES='reader,member,admin')
            return stub(env, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.api.auth.NovaKeystoneContext._create_context',
            token_context))
        tmp = self.useFixture(fixtures.TempDir()).path
        db_api.configure('sqlite:///' + os.path.join(tmp, 'puma.sqlite'))
        self.addCleanup(db_api.configure)
        migration.upgrade()
        self.ctxt = context.get_admin_context()
        self.manager = manager.SchedulerManager(
            rpcapi.ComputeAPI(nova_rpc.TRANSPORT, timeout=10),
            nova=nova_client.SDKNovaClient())
        # What the computes would report: dest keeps 2 GiB of the 4 GiB
        # server, sub holds the rest.
        for host, (total, used) in self.HOSTS.items():
            if host != 'src':
                self.manager.report_host(self.ctxt, host, {
                    'memory_mb': total, 'free_mb': total - used,
                    'lendable_mb': 0, 'address': '127.0.0.1',
                    'shoot4u': False, 'split': True, 'vms': []})
        self._stop_scheduler()
        self.sched_server = scheduler_double.serve(self.manager)
        self._fail_port_binding_on('dest')

    def _entries(self):
        return [(e['main_host'], e['sub_host'], e['state'])
                for e in db_api.ledger_list(self.ctxt)]

    def test_plan_of_a_requested_destination_nova_gave_up(self):
        server = self._boot(self._split_flavor())
        # Nothing in Nova yet: nothing read is released.
        self.assertEqual([], self.manager.release_failed_plans(self.ctxt))
        try:
            self.api.post_server_action(
                server['id'],
                {'os-migrateLive': {'host': 'dest',
                                    'block_migration': 'auto'}})
        except client.OpenStackApiException:
            pass  # CastAsCall: the conductor's error reaches the API.
        self._wait_for_migration_status(server, ['error'])
        self._wait_for_state_change(server, 'ACTIVE')
        # dest planned with the real scheduler and started the memory
        # server; with a requested host Nova tries no other.
        self.assertEqual([('dest', 'sub', 'planned')], self._entries())
        self.assertIn(server['id'],
                      self.agents['sub'].memory_servers.list())
        (record,) = self.manager.nova.live_migrations(server['id'])
        self.assertEqual('error', record['status'])
        released = self.manager.release_failed_plans(self.ctxt)
        self.assertEqual([(server['id'], 'dest', 'planned')],
                         [(e['instance_uuid'], e['main_host'], e['state'])
                          for e in released])
        self.assertEqual([('dest', 'sub', 'released')], self._entries())
        self.assertEqual({}, db_api.ledger_commitments(self.ctxt))
        self.assertEqual({}, self.agents['sub'].memory_servers.list())
        # (Nova shows the hosts to its os-migrations:index:host rule.)
        self.assertIn("Nova's live migration %s to %s ended error"
                      % (record['uuid'], record['dest_compute'] or
                         'any host'), self.stdlog.logger.output)
        # Read again: nothing more to release.
        self.assertEqual([], self.manager.release_failed_plans(self.ctxt))
        self.assertEqual(
            'src', self.api.get_server(server['id'])['OS-EXT-SRV-ATTR:host'])
