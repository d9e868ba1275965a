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
"""Columns the commands show, per resource (field names of API v1)."""

HOST = ('name', 'address', 'memory_mb', 'free_mb', 'lendable_mb',
        'merged_mb', 'cache_saved_mb', 'shoot4u', 'split', 'updated_at')
PAIR = ('lender', 'borrower', 'lender_host', 'borrower_host', 'capacity_mb',
        'created_at')
LEDGER = ('id', 'instance_uuid', 'main_host', 'sub_host', 'mb',
          'main_limit_mb', 'state', 'updated_at')
MEMORY_SERVER = ('instance_uuid', 'host', 'size_mb', 'uri', 'state')
SPLIT_MIGRATION = ('server', 'main_host', 'sub_host', 'main_limit_mb',
                   'remote_mb', 'state')
MIGRATION = ('server', 'name', 'migration_id', 'status', 'kind',
             'source_host', 'dest_host', 'memory_total_mb',
             'memory_processed_mb', 'memory_remaining_mb', 'main_host',
             'sub_hosts', 'main_limit_mb', 'remote_mb', 'split_state')


def labels(fields):
    """Column titles: 'capacity_mb' -> 'Capacity MB'."""
    return tuple(' '.join('MB' if w == 'mb' else
                          'UUID' if w == 'uuid' else w.capitalize()
                          for w in f.split('_')) for f in fields)
