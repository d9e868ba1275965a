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
"""Tables of the Memory Pool panel (rows are puma-api v1 dicts)."""

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy
from horizon import tables

from puma_nova.dashboard import api


def _get(field):
    return lambda row: row.get(field)


class PairsTable(tables.DataTable):
    lender = tables.Column(_get('lender'), verbose_name=_('Lender'))
    borrower = tables.Column(_get('borrower'), verbose_name=_('Borrower'))
    lender_host = tables.Column(_get('lender_host'),
                                verbose_name=_('Lender Host'))
    borrower_host = tables.Column(_get('borrower_host'),
                                  verbose_name=_('Borrower Host'))
    capacity_mb = tables.Column(_get('capacity_mb'),
                                verbose_name=_('Capacity (MiB)'))

    def get_object_id(self, datum):
        return '%s-%s' % (datum['lender'], datum['borrower'])

    class Meta(object):
        name = 'pairs'
        verbose_name = _('Lending Pairs')


class ReleaseLedgerEntry(tables.BatchAction):
    """puma-api's release of a split that never started or failed."""

    name = 'release'
    action_type = 'danger'
    help_text = _('Gives back the memory the split holds in placement and '
                  'stops its memory server.')

    @staticmethod
    def action_present(count):
        return ngettext_lazy('Release Entry', 'Release Entries', count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy('Released Entry', 'Released Entries', count)

    def allowed(self, request, datum=None):
        # Entries in use (running, done) are refused by puma-api.
        return datum is None or datum['state'] in ('planned', 'failed')

    def action(self, request, obj_id):
        api.ledger_release(request, obj_id)


class LedgerTable(tables.DataTable):
    instance_uuid = tables.Column(_get('instance_uuid'),
                                  verbose_name=_('Server'))
    main_host = tables.Column(_get('main_host'), verbose_name=_('Main Host'))
    sub_host = tables.Column(_get('sub_host'), verbose_name=_('Sub Host'))
    mb = tables.Column(_get('mb'), verbose_name=_('Remote (MiB)'))
    main_limit_mb = tables.Column(_get('main_limit_mb'),
                                  verbose_name=_('Resident (MiB)'))
    state = tables.Column(_get('state'), verbose_name=_('State'))

    def get_object_id(self, datum):
        return str(datum['id'])

    class Meta(object):
        name = 'ledger'
        verbose_name = _('Split Migrations')
        row_actions = (ReleaseLedgerEntry,)


class MemoryServersTable(tables.DataTable):
    instance_uuid = tables.Column(_get('instance_uuid'),
                                  verbose_name=_('Server'))
    host = tables.Column(_get('host'), verbose_name=_('Host'))
    size_mb = tables.Column(_get('size_mb'), verbose_name=_('Size (MiB)'))
    state = tables.Column(_get('state'), verbose_name=_('State'))

    def get_object_id(self, datum):
        return datum['instance_uuid']

    class Meta(object):
        name = 'memory_servers'
        verbose_name = _('Memory Servers')


def _split_id(obj_id):
    """'SERVER:MIGRATION' -> (server, migration)."""
    server, _sep, migration = obj_id.rpartition(':')
    return server, migration


class AbortLiveMigration(tables.BatchAction):
    """Nova's abort of a live migration (a split one included)."""

    name = 'abort'
    action_type = 'danger'
    help_text = _('The server stays where it was, with all its memory.')

    @staticmethod
    def action_present(count):
        return ngettext_lazy('Abort Live Migration', 'Abort Live Migrations',
                             count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy('Aborted Live Migration',
                             'Aborted Live Migrations', count)

    def allowed(self, request, datum=None):
        return datum is None or datum['status'] in (
            'queued', 'preparing', 'running')

    def action(self, request, obj_id):
        api.live_migration_abort(request, *_split_id(obj_id))


class ForceCompleteLiveMigration(tables.BatchAction):
    """Nova's force complete: the guest pauses until the move ends."""

    name = 'force_complete'
    help_text = _('The server pauses until the migration ends.')

    @staticmethod
    def action_present(count):
        return ngettext_lazy('Force Complete', 'Force Complete', count)

    @staticmethod
    def action_past(count):
        return ngettext_lazy('Forced Completion of Live Migration',
                             'Forced Completion of Live Migrations', count)

    def allowed(self, request, datum=None):
        return datum is None or datum['status'] == 'running'

    def action(self, request, obj_id):
        api.live_migration_force_complete(request, *_split_id(obj_id))


class LiveMigrationsTable(tables.DataTable):
    server = tables.Column(_get('server'), verbose_name=_('Server'))
    kind = tables.Column(_get('kind'), verbose_name=_('Kind'))
    status = tables.Column(_get('status'), verbose_name=_('Status'))
    source_host = tables.Column(_get('source_host'),
                                verbose_name=_('Source Host'))
    dest_host = tables.Column(_get('dest_host'),
                              verbose_name=_('Destination Host'))
    memory_total_mb = tables.Column(_get('memory_total_mb'),
                                    verbose_name=_('Memory (MiB)'))
    memory_remaining_mb = tables.Column(_get('memory_remaining_mb'),
                                        verbose_name=_('Remaining (MiB)'))
    main_host = tables.Column(_get('main_host'), verbose_name=_('Main Host'))
    sub_hosts = tables.Column(_get('sub_hosts'),
                              verbose_name=_('Sub Hosts'))
    remote_mb = tables.Column(_get('remote_mb'),
                              verbose_name=_('Remote (MiB)'))

    def get_object_id(self, datum):
        return datum['id']

    class Meta(object):
        name = 'live_migrations'
        verbose_name = _('Live Migrations')
        row_actions = (ForceCompleteLiveMigration, AbortLiveMigration)


class HostsTable(tables.DataTable):
    name = tables.Column(_get('name'), verbose_name=_('Host'))
    memory_mb = tables.Column(_get('memory_mb'),
                              verbose_name=_('Memory (MiB)'))
    free_mb = tables.Column(_get('free_mb'), verbose_name=_('Free (MiB)'))
    lendable_mb = tables.Column(_get('lendable_mb'),
                                verbose_name=_('Lendable (MiB)'))
    merged_mb = tables.Column(
        _get('merged_mb'), verbose_name=_('Saved by Merging (MiB)'),
        help_text=_('Memory the host\'s page merging (KSM) saves.'))
    cache_saved_mb = tables.Column(
        _get('cache_saved_mb'),
        verbose_name=_('Saved by Exclusive Caching (MiB)'),
        help_text=_('Host page cache that exclusive host/guest caching '
                    'saves: what the guests read from their disks that '
                    'the host does not hold (an upper bound).'))
    shoot4u = tables.Column(_get('shoot4u'), verbose_name=_('Shoot4U'))
    split = tables.Column(_get('split'), verbose_name=_('Split'))
    updated_at = tables.Column(_get('updated_at'),
                               verbose_name=_('Reported At'))

    def get_object_id(self, datum):
        return datum['name']

    class Meta(object):
        name = 'hosts'
        verbose_name = _('Hosts')
