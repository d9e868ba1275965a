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
from horizon import tables


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
