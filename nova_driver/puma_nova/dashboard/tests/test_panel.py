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
"""The Memory Pool panel: its five tables, actions, errors and who sees
it."""

import types
from unittest import mock

from django.urls import reverse
import horizon
from novaclient import exceptions as nova_exceptions
from openstack_dashboard.test import helpers as test

from puma_nova.dashboard import api
from puma_nova.dashboard.content.memory_pool import panel

INDEX_URL = reverse('horizon:admin:memory_pool:index')
PUMA_SERVICE = {
    'type': 'memory-pool', 'name': 'puma', 'endpoints_links': [],
    'endpoints': [{'region': 'RegionOne', 'interface': interface,
                   'url': 'http://puma.example.com:9891'}
                  for interface in ('admin', 'internal', 'public')]}

PAIRS = [{'lender': 'l-uuid', 'borrower': 'b-uuid', 'lender_host': 'c1',
          'borrower_host': 'c2', 'capacity_mb': 1024}]
LEDGER = [{'id': 7, 'instance_uuid': 'big-uuid', 'main_host': 'c1',
           'sub_host': 'c3', 'mb': 2608, 'main_limit_mb': 1488,
           'state': 'running'}]
MEMORY_SERVERS = [{'instance_uuid': 'big-uuid', 'host': 'c3',
                   'size_mb': 2608, 'state': 'active'}]
LIVE_MIGRATIONS = [
    {'id': 'big-uuid:12', 'server': 'big-uuid', 'kind': 'split',
     'status': 'running', 'source_host': 'c0', 'dest_host': 'c1',
     'memory_total_mb': 4096, 'memory_remaining_mb': 1234,
     'main_host': 'c1', 'sub_hosts': 'c3', 'remote_mb': 2608},
    {'id': 'small-uuid:13', 'server': 'small-uuid', 'kind': 'precopy',
     'status': 'queued', 'source_host': 'c0', 'dest_host': 'c2',
     'memory_total_mb': None, 'memory_remaining_mb': None,
     'main_host': None, 'sub_hosts': None, 'remote_mb': None}]
HOSTS = [{'name': 'c1', 'memory_mb': 65536, 'free_mb': 30001,
          'lendable_mb': 28001, 'merged_mb': 4321, 'cache_saved_mb': 765,
          'shoot4u': True,
          'split': True, 'updated_at': '2026-11-29T04:20:00'}]
ALL_APIS = ['pair_list', 'ledger_list', 'memory_server_list',
            'live_migration_list', 'host_list']


class MemoryPoolViewTests(test.BaseAdminViewTests):

    def _setup_user(self, **kwargs):
        kwargs.setdefault('service_catalog',
                          list(self.service_catalog) + [PUMA_SERVICE])
        super()._setup_user(**kwargs)

    def _mock_all(self):
        self.mock_pair_list.return_value = PAIRS
        self.mock_ledger_list.return_value = LEDGER
        self.mock_memory_server_list.return_value = MEMORY_SERVERS
        self.mock_live_migration_list.return_value = LIVE_MIGRATIONS
        self.mock_host_list.return_value = HOSTS

    @test.create_mocks({api: ALL_APIS})
    def test_index_shows_the_five_tables(self):
        self._mock_all()
        res = self.client.get(INDEX_URL)
        self.assertTemplateUsed(res, 'memory_pool/index.html')
        tables = res.context['tab_group'].get_tabs()
        self.assertEqual(['pairs_tab', 'ledger_tab', 'memory_servers_tab',
                          'live_migrations_tab', 'hosts_tab'],
                         [t.slug for t in tables])
        content = res.content.decode()
        for text in ('l-uuid', 'b-uuid', '1024', 'big-uuid', '2608',
                     '1488', 'running', 'active', 'split', '1234',
                     'small-uuid', 'queued', 'Saved by Merging (MiB)',
                     'Saved by Exclusive Caching (MiB)', '30001', '28001',
                     '4321', '765'):
            self.assertIn(text, content)

    @test.create_mocks({api: ALL_APIS})
    def test_row_actions_follow_the_status(self):
        self._mock_all()
        content = self.client.get(INDEX_URL).content.decode()
        # A running migration can be forced or aborted; a queued one only
        # aborted (Nova refuses to force one that does not run).
        for name in ('live_migrations__force_complete__big-uuid:12',
                     'live_migrations__abort__big-uuid:12',
                     'live_migrations__abort__small-uuid:13'):
            self.assertIn('value="%s"' % name, content)
        self.assertNotIn('live_migrations__force_complete__small-uuid:13',
                         content)
        # Abort asks for a confirmation (Horizon's danger actions).
        self.assertIn('id="live_migrations__row_big-uuid:12__action_abort" '
                      'class="data-table-action btn-danger btn"', content)

    @test.create_mocks({api: ALL_APIS + ['live_migration_abort',
                                         'live_migration_force_complete']})
    def test_abort_and_force_complete_call_nova(self):
        self._mock_all()
        for action, mocked in (
                ('abort', self.mock_live_migration_abort),
                ('force_complete', self.mock_live_migration_force_complete)):
            res = self.client.post(INDEX_URL, {
                'action': 'live_migrations__%s__big-uuid:12' % action})
            self.assertNoFormErrors(res)
            self.assertRedirectsNoFollow(res, INDEX_URL)
            mocked.assert_called_once_with(test.IsHttpRequest(),
                                           'big-uuid', '12')

    @test.create_mocks({api: ALL_APIS + ['ledger_release']})
    def test_only_planned_or_failed_entries_can_be_released(self):
        self._mock_all()
        self.mock_ledger_list.return_value = LEDGER + [
            dict(LEDGER[0], id=8, state='planned')]
        content = self.client.get(INDEX_URL).content.decode()
        self.assertIn('value="ledger__release__8"', content)
        self.assertNotIn('value="ledger__release__7"', content)
        res = self.client.post(INDEX_URL, {'action': 'ledger__release__8'})
        self.assertRedirectsNoFollow(res, INDEX_URL)
        self.mock_ledger_release.assert_called_once_with(
            test.IsHttpRequest(), '8')

    @test.create_mocks({api: ALL_APIS + ['live_migration_abort']})
    def test_refused_abort_is_an_error_message(self):
        self._mock_all()
        self.mock_live_migration_abort.side_effect = self.exceptions.nova
        res = self.client.post(INDEX_URL, {
            'action': 'live_migrations__abort__big-uuid:12'})
        self.assertRedirectsNoFollow(res, INDEX_URL)
        self.assertMessageCount(error=1)

    @test.create_mocks({api: ALL_APIS})
    def test_api_failure_is_reported_not_raised(self):
        self.mock_pair_list.side_effect = self.exceptions.nova
        self.mock_ledger_list.return_value = LEDGER
        self.mock_memory_server_list.return_value = []
        self.mock_live_migration_list.return_value = []
        self.mock_host_list.return_value = HOSTS
        res = self.client.get(INDEX_URL)
        self.assertEqual(200, res.status_code)
        self.assertIn('big-uuid', res.content.decode())
        self.assertMessageCount(res, error=1)
        [message] = [str(m) for m in res.context['messages']]
        self.assertTrue(message.startswith(
            'Unable to retrieve the lending pairs.'), message)


class MemoryPoolVisibilityTests(test.TestCase):

    def test_panel_is_registered_for_admins_with_the_service(self):
        dashboard = horizon.get_dashboard('admin')
        mp = dashboard.get_panel('memory_pool')
        self.assertIsInstance(mp, panel.MemoryPool)
        self.assertEqual(('openstack.services.memory-pool',
                          'openstack.roles.admin'), mp.permissions)
        self.assertIn(mp, list(dashboard.get_panel_group('puma')))

    def test_members_without_the_service_are_sent_away(self):
        res = self.client.get(INDEX_URL)
        # Horizon's middleware answers NotAuthorized of a logged-in user
        # with its "not authorized" page and 403 (not a login redirect).
        self.assertEqual(403, res.status_code)
        self.assertTemplateUsed(res, 'not_authorized.html')


class MemoryPoolNoServiceTests(test.BaseAdminViewTests):

    def test_admins_without_the_service_are_sent_away(self):
        # The admin dashboard lets admins in: the panel's own
        # memory-pool permission is what refuses them here.
        res = self.client.get(INDEX_URL)
        self.assertEqual(403, res.status_code)
        self.assertTemplateUsed(res, 'not_authorized.html')


def _migration(mid, uuid, status):
    return types.SimpleNamespace(id=mid, instance_uuid=uuid, status=status)


def _progress(mid, status, source='c0', dest='c1'):
    return types.SimpleNamespace(
        id=mid, status=status, source_compute=source, dest_compute=dest,
        memory_total_bytes=4096 << 20, memory_processed_bytes=1024 << 20,
        memory_remaining_bytes=3072 << 20)


class LiveMigrationListTests(test.TestCase):
    """api.live_migration_list on a mocked novaclient."""

    @mock.patch.object(api, 'ledger_list')
    @mock.patch.object(api._nova, 'novaclient')
    def test_running_migrations_with_progress_and_split(self, novaclient,
                                                        ledger_list):
        nova = novaclient.return_value
        listed = {'running': [_migration(4, 'gone-uuid', 'running'),
                              _migration(2, 'big-uuid', 'running')],
                  'running (post-copy)': [
                      _migration(3, 'pc-uuid', 'running (post-copy)')]}
        nova.migrations.list.side_effect = (
            lambda status, migration_type: listed.get(status, []))
        progress = {2: _progress(2, 'running'),
                    3: _progress(3, 'running (post-copy)')}

        def get(server, mid):
            if mid not in progress:
                raise nova_exceptions.NotFound(404)
            return progress[mid]
        nova.server_migrations.get.side_effect = get
        ledger_list.return_value = LEDGER
        rows = api.live_migration_list(mock.sentinel.request)
        novaclient.assert_called_with(mock.sentinel.request,
                                      api.NOVA_MICROVERSION)
        self.assertEqual(
            [mock.call(status=s, migration_type='live-migration')
             for s in api.LIVE_STATUSES],
            nova.migrations.list.call_args_list)
        self.assertEqual(
            [('big-uuid:2', 'split', 4096, 3072, 'c1', 'c3', 2608),
             ('pc-uuid:3', 'post-copy', 4096, 3072, None, None, None)],
            [(r['id'], r['kind'], r['memory_total_mb'],
              r['memory_remaining_mb'], r['main_host'], r['sub_hosts'],
              r['remote_mb']) for r in rows])

    @mock.patch.object(api._nova, 'novaclient')
    def test_abort_and_force_complete(self, novaclient):
        api.live_migration_abort(mock.sentinel.request, 'u', '7')
        api.live_migration_force_complete(mock.sentinel.request, 'u', '7')
        sm = novaclient.return_value.server_migrations
        sm.live_migration_abort.assert_called_once_with('u', '7')
        sm.live_migrate_force_complete.assert_called_once_with('u', '7')

    @mock.patch.object(api, '_client')
    def test_host_list_asks_for_what_merging_and_caching_save(self, client):
        client.return_value.list.return_value = HOSTS
        self.assertEqual(HOSTS, api.host_list(mock.sentinel.request))
        client.return_value.list.assert_called_once_with(
            'hosts', microversion='1.3')

    @mock.patch.object(api, '_client')
    def test_ledger_release_asks_puma_api(self, client):
        client.return_value.release_ledger_entry.return_value = {'id': 8}
        self.assertEqual({'id': 8},
                         api.ledger_release(mock.sentinel.request, '8'))
        client.assert_called_once_with(mock.sentinel.request)
        client.return_value.release_ledger_entry.assert_called_once_with(
            '8')
