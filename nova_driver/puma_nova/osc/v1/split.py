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
"""openstack puma split migrate"""

from osc_lib.command import command
from osc_lib import utils

from puma_nova.osc import resource_fields as res_fields


class MigrateSplit(command.ShowOne):
    """Live-migrate a server, splitting its memory if it does not fit.

    The scheduler plans the split (main host, sub host, resident limit),
    then Nova live-migrates the server to the main host.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('server', metavar='<server>',
                            help='server to migrate (name or ID)')
        parser.add_argument('--host', metavar='<host>',
                            help='main host (default: the scheduler picks '
                                 'the host with the most free memory)')
        return parser

    def take_action(self, parsed_args):
        result = self.app.client_manager.puma.split_migrate(
            parsed_args.server, host=parsed_args.host)
        fields = res_fields.SPLIT_MIGRATION
        return (res_fields.labels(fields),
                utils.get_dict_properties(result, fields))
