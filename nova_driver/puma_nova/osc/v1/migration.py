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
"""openstack puma migration show"""

from osc_lib.command import command
from osc_lib import exceptions

from puma_nova.osc import resource_fields as res_fields

MIB = 1 << 20

# Nova's status of a libvirt live migration after its switch to post-copy
# (nova.virt.libvirt.driver._live_migration_monitor).
POST_COPY_STATUS = 'running (post-copy)'
# Ledger states of a split that holds memory (puma_nova.db.models).
SPLIT_STATES = ('planned', 'running', 'done')


def _mib(value):
    return None if value is None else value // MIB


def migration_view(server, migrations, entries):
    """What ``openstack puma migration show`` prints, as a dict.

    SERVER is Nova's server, MIGRATIONS Nova's in-progress migrations of
    it (GET /servers/{id}/migrations) and ENTRIES its active Puma ledger
    entries.  The kind of a running migration: 'split' when a ledger
    entry is 'running', 'post-copy' after Nova switched it, otherwise
    'precopy'.  A server that runs split with no migration shows its
    split alone.
    """
    mig = max(migrations, key=lambda m: m.id) if migrations else None
    split = [e for e in entries if e.get('state') in SPLIT_STATES]
    if mig is None:
        kind = None
    elif any(e['state'] == 'running' for e in split):
        kind = 'split'
    elif mig.status == POST_COPY_STATUS:
        kind = 'post-copy'
    else:
        kind = 'precopy'
    # One entry per sub host (two when the remote memory is mirrored).
    return {
        'server': server.id,
        'name': server.name,
        'migration_id': mig.id if mig else None,
        'status': mig.status if mig else None,
        'kind': kind,
        'source_host': mig.source_compute if mig else None,
        'dest_host': mig.dest_compute if mig else None,
        'memory_total_mb': _mib(mig.memory_total_bytes) if mig else None,
        'memory_processed_mb': (_mib(mig.memory_processed_bytes)
                                if mig else None),
        'memory_remaining_mb': (_mib(mig.memory_remaining_bytes)
                                if mig else None),
        'main_host': split[0]['main_host'] if split else None,
        'sub_hosts': ','.join(sorted({e['sub_host'] for e in split})) or None,
        'main_limit_mb': split[0]['main_limit_mb'] if split else None,
        'remote_mb': sum(e['mb'] for e in split) if split else None,
        'split_state': ','.join(sorted({e['state'] for e in split})) or None,
    }


class ShowMigration(command.ShowOne):
    """Show a server's live migration in progress and its split.

    Nova's progress of the running live migration (memory total,
    processed, remaining) and its kind (precopy, post-copy or split),
    beside the server's split as Puma's ledger holds it: main host, sub
    host(s), resident limit and remote memory.  Needs the admin rights
    of Nova's server migrations API.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help='server (name or ID)')
        return parser

    def take_action(self, parsed_args):
        compute = self.app.client_manager.sdk_connection.compute
        server = compute.find_server(parsed_args.server,
                                     ignore_missing=False)
        migrations = list(compute.server_migrations(server))
        entries = self.app.client_manager.puma.list(
            'ledger', server=server.id, active='true')
        if not migrations and not entries:
            raise exceptions.CommandError(
                'server %s has no live migration in progress and does not '
                'run split' % parsed_args.server)
        view = migration_view(server, migrations, entries)
        fields = res_fields.MIGRATION
        return (res_fields.labels(fields),
                tuple(view[f] for f in fields))
