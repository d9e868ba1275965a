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

"""puma-api (memory-pool) as a cloud's admin and its members see it."""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from puma_tempest_plugin.tests.api import base

HOST_FIELDS = {'name', 'address', 'memory_mb', 'free_mb', 'lendable_mb',
               'shoot4u', 'split', 'updated_at'}
LEDGER_FIELDS = {'id', 'instance_uuid', 'project_id', 'main_host',
                 'sub_host', 'mb', 'main_limit_mb', 'state', 'created_at',
                 'updated_at'}
PAIR_FIELDS = {'lender', 'borrower', 'lender_host', 'borrower_host',
               'capacity_mb', 'created_at'}
MEMORY_SERVER_FIELDS = {'instance_uuid', 'host', 'size_mb', 'uri', 'state',
                        'updated_at'}


class MemoryPoolAdminTest(base.BaseMemoryPoolTest):

    @decorators.idempotent_id('1488fc51-5c22-4014-ad4e-29de236d9cca')
    def test_list_hosts(self):
        hosts = self.admin_client.list_hosts()['hosts']
        # Every nova-compute with the Puma driver reports itself.
        self.assertNotEmpty(hosts)
        for host in hosts:
            self.assertEqual(HOST_FIELDS, set(host))
            self.assertLessEqual(host['free_mb'], host['memory_mb'])
            self.assertLessEqual(host['lendable_mb'], host['free_mb'])

    @decorators.idempotent_id('ed43080b-d4ab-428b-ae07-2a9d1790caee')
    def test_hosts_page_by_page_from_1_1(self):
        everyone = self.admin_client.list_hosts()['hosts']
        seen = []
        with self.admin_client.microversion('1.1'):
            body = self.admin_client.list_hosts(limit=1)
            headers = {k.lower(): v for k, v in body.response.items()}
            self.assertEqual('memory-pool 1.1',
                             headers['openstack-api-version'])
            while True:
                self.assertLessEqual(len(body['hosts']), 1)
                seen += [h['name'] for h in body['hosts']]
                links = body.get('hosts_links')
                if not links:
                    break
                self.assertEqual('next', links[0]['rel'])
                body = self.admin_client.follow(links[0]['href'])
        self.assertEqual(sorted(h['name'] for h in everyone), sorted(seen))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('decd37e4-a321-4b53-906d-7ba1c7700c64')
    def test_paging_needs_1_1(self):
        self.assertRaises(lib_exc.BadRequest, self.admin_client.list_hosts,
                          limit=1)

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('42cde545-d7bf-441a-8570-b35a5ab6cd09')
    def test_unknown_microversion_is_not_acceptable(self):
        with self.admin_client.microversion('9.99'):
            self.assertRaises(lib_exc.NotAcceptable,
                              self.admin_client.list_hosts)

    @decorators.idempotent_id('136ff63e-e0dc-431b-92e2-14b2f6ebc531')
    def test_list_ledger_pairs_and_memory_servers(self):
        for entry in self.admin_client.list_ledger()['ledger']:
            self.assertEqual(LEDGER_FIELDS, set(entry))
        active = self.admin_client.list_ledger(active='true')['ledger']
        self.assertTrue(all(e['state'] in ('planned', 'running')
                            for e in active), active)
        for pair in self.admin_client.list_pairs()['pairs']:
            self.assertEqual(PAIR_FIELDS, set(pair))
        for server in self.admin_client.list_memory_servers()[
                'memory_servers']:
            self.assertEqual(MEMORY_SERVER_FIELDS, set(server))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('90bd14d9-0b5e-48fd-9a81-ecfa43c817a0')
    def test_bad_filter_is_refused(self):
        self.assertRaises(lib_exc.BadRequest, self.admin_client.list_ledger,
                          active='perhaps')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('46c11d13-f9c4-410f-a711-105725b25a7c')
    def test_release_of_an_unknown_entry_is_not_found(self):
        self.assertRaises(lib_exc.NotFound,
                          self.admin_client.release_ledger_entry, 987654321)


class MemoryPoolMemberTest(base.BaseMemoryPoolTest):
    """A member of a project is not the cloud's admin: refused."""

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('f2698e10-6973-42de-a28d-54ef13bc474b')
    def test_member_cannot_list(self):
        for call in (self.member_client.list_hosts,
                     self.member_client.list_ledger,
                     self.member_client.list_pairs,
                     self.member_client.list_memory_servers):
            self.assertRaises(lib_exc.Forbidden, call)

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('dfdcd79c-960b-44c0-9a80-c29e2b40fa20')
    def test_member_cannot_release(self):
        # The rule's target is the entry's project: an entry of another
        # project (the member's new project has none) is not found for a
        # caller that is not an administrator, as a server is in Nova.
        self.assertRaises(lib_exc.NotFound,
                          self.member_client.release_ledger_entry, 1)
