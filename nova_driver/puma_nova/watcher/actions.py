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
"""Watcher action: a split migration, run by Watcher's applier.

Entry point ``watcher_actions``, ``puma_split_migrate``.  It is Watcher's
own live ``migrate`` action (the same pre-conditions, abort and revert)
to the main host that the strategy planned: Nova's live migration to a
host that cannot hold the server whole becomes a split migration in
Puma's driver, whose destination check asks puma-scheduler for the
memory server with the data of that moment.  ``sub_node`` and
``resident_limit_mb`` say what the strategy planned (an operator reads
them in the action plan); puma-scheduler may choose another sub host if
the cluster changed since the audit.
"""

from watcher.applier.actions import migration

UUID_PATTERN = ('^([a-fA-F0-9]){8}-([a-fA-F0-9]){4}-([a-fA-F0-9]){4}-'
                '([a-fA-F0-9]){4}-([a-fA-F0-9]){12}$')


class SplitMigrate(migration.Migrate):
    """Live-migrates a server to a main host that will split it.

    The action schema is::

        schema = Schema({
            'resource_id': str,          # the server's UUID
            'source_node': str,          # the host it runs on
            'destination_node': str,     # the main host
            'sub_node': str,             # the planned memory server's host
            'resident_limit_mb': int,    # planned resident memory on the
                                         # main host
        })
    """

    @property
    def schema(self):
        return {
            'type': 'object',
            'properties': {
                'resource_id': {'type': 'string', 'minLength': 1,
                                'pattern': UUID_PATTERN},
                'resource_name': {'type': 'string', 'minLength': 1},
                'source_node': {'type': 'string', 'minLength': 1},
                'destination_node': {'type': 'string', 'minLength': 1},
                'sub_node': {'type': 'string', 'minLength': 1},
                'resident_limit_mb': {'type': 'integer', 'minimum': 1},
            },
            'required': ['resource_id', 'source_node', 'destination_node'],
            'additionalProperties': False,
        }

    @property
    def migration_type(self):
        return self.LIVE_MIGRATION

    def check_abort(self):
        # Watcher's base asks the class name: only its own Migrate action
        # is abortable there; a live migration of this one is too.
        return True

    def get_description(self):
        return ('Split-migrating a VM instance from source_node to '
                'destination_node, its remote memory on another host')
