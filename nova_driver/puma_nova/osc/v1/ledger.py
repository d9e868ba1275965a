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
"""openstack puma ledger list, openstack puma ledger release"""

from osc_lib.command import command
from osc_lib import utils

from puma_nova.osc import resource_fields as res_fields


class ListLedger(command.Lister):
    """List the split-migration ledger."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--host', metavar='<host>',
                            help='only entries with this main or sub host')
        parser.add_argument('--server', metavar='<server-uuid>',
                            help='only entries of this server')
        parser.add_argument('--active', action='store_true',
                            help='only entries that hold memory '
                                 '(planned, running, done)')
        parser.add_argument('--stale', action='store_true',
                            help='only entries planned or failed for '
                                 'longer than the scheduler\'s plan_ttl '
                                 '(see "openstack puma ledger release")')
        return parser

    def take_action(self, parsed_args):
        rows = self.app.client_manager.puma.list(
            'ledger', host=parsed_args.host, server=parsed_args.server,
            active='true' if parsed_args.active else None,
            stale='true' if parsed_args.stale else None)
        fields = res_fields.LEDGER
        return (res_fields.labels(fields),
                (utils.get_dict_properties(r, fields) for r in rows))


class ReleaseLedgerEntry(command.ShowOne):
    """Release a planned or failed split-migration ledger entry.

    Gives back the memory a split migration that never started (or
    failed without being released) still holds in placement, and stops
    its memory server.  Entries in use (running, done) are refused.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('entry', metavar='<entry-id>', type=int,
                            help='ledger entry id (see "openstack puma '
                                 'ledger list --stale")')
        return parser

    def take_action(self, parsed_args):
        entry = self.app.client_manager.puma.release_ledger_entry(
            parsed_args.entry)
        fields = res_fields.LEDGER
        return (res_fields.labels(fields),
                utils.get_dict_properties(entry, fields))
