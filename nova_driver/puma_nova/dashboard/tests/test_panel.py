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
"""The Memory Pool panel: its three tables, errors and who sees it."""

from django.urls import reverse
import horizon
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


class MemoryPoolViewTests(test.BaseAdminViewTests):

    def _setup_user(self, **kwargs):
        kwargs.setdefault('service_catalog',
                          list(self.service_catalog) + [PUMA_SERVICE])
        super()._setup_user(**kwargs)

    @test.create_mocks({api: ['pair_list', 'ledger_list',
                              'memory_server_list']})
    def test_index_shows_the_three_tables(self):
        self.mock_pair_list.return_value = PAIRS
        self.mock_ledger_list.return_value = LEDGER
        self.mock_memory_server_list.return_value = MEMORY_SERVERS
        res = self.client.get(INDEX_URL)
        self.assertTemplateUsed(res, 'memory_pool/index.html')
        tables = res.context['tab_group'].get_tabs()
        self.assertEqual(['pairs_tab', 'ledger_tab', 'memory_servers_tab'],
                         [t.slug for t in tables])
        content = res.content.decode()
        for text in ('l-uuid', 'b-uuid', '1024', 'big-uuid', '2608',
                     '1488', 'running', 'active'):
            self.assertIn(text, content)

    @test.create_mocks({api: ['pair_list', 'ledger_list',
                              'memory_server_list']})
    def test_api_failure_is_reported_not_raised(self):
        self.mock_pair_list.side_effect = self.exceptions.nova
        self.mock_ledger_list.return_value = LEDGER
        self.mock_memory_server_list.return_value = []
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
