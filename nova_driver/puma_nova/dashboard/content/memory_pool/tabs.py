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
"""Tabs of the Memory Pool panel: one table each."""

from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import tabs

from puma_nova.dashboard import api
from puma_nova.dashboard.content.memory_pool import tables

DETAIL_TABLE = 'horizon/common/_detail_table.html'


def _rows(request, fetch, message):
    try:
        return fetch(request)
    except Exception:
        exceptions.handle(request, message)
        return []


class PairsTab(tabs.TableTab):
    table_classes = (tables.PairsTable,)
    name = tables.PairsTable.Meta.verbose_name
    slug = 'pairs_tab'
    template_name = DETAIL_TABLE

    def get_pairs_data(self):
        return _rows(self.request, api.pair_list,
                     _('Unable to retrieve the lending pairs.'))


class LedgerTab(tabs.TableTab):
    table_classes = (tables.LedgerTable,)
    name = tables.LedgerTable.Meta.verbose_name
    slug = 'ledger_tab'
    template_name = DETAIL_TABLE

    def get_ledger_data(self):
        return _rows(self.request, api.ledger_list,
                     _('Unable to retrieve the split-migration ledger.'))


class MemoryServersTab(tabs.TableTab):
    table_classes = (tables.MemoryServersTable,)
    name = tables.MemoryServersTable.Meta.verbose_name
    slug = 'memory_servers_tab'
    template_name = DETAIL_TABLE

    def get_memory_servers_data(self):
        return _rows(self.request, api.memory_server_list,
                     _('Unable to retrieve the memory servers.'))


class LiveMigrationsTab(tabs.TableTab):
    table_classes = (tables.LiveMigrationsTable,)
    name = tables.LiveMigrationsTable.Meta.verbose_name
    slug = 'live_migrations_tab'
    template_name = DETAIL_TABLE

    def get_live_migrations_data(self):
        return _rows(self.request, api.live_migration_list,
                     _('Unable to retrieve the live migrations.'))


class HostsTab(tabs.TableTab):
    table_classes = (tables.HostsTable,)
    name = tables.HostsTable.Meta.verbose_name
    slug = 'hosts_tab'
    template_name = DETAIL_TABLE

    def get_hosts_data(self):
        return _rows(self.request, api.host_list,
                     _('Unable to retrieve the hosts.'))


class MemoryPoolTabs(tabs.TabGroup):
    slug = 'memory_pool'
    tabs = (PairsTab, LedgerTab, MemoryServersTab, LiveMigrationsTab,
            HostsTab)
    sticky = True
