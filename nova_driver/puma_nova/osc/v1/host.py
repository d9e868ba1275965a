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
"""openstack puma host list"""

from osc_lib.command import command
from osc_lib import utils

from puma_nova.osc import resource_fields as res_fields

# merged_mb came with puma-api 1.2, cache_saved_mb with 1.3.
MICROVERSION = '1.3'


class ListHost(command.Lister):
    """List the compute hosts and their last memory report.

    Memory, free and lendable memory, the memory page merging (KSM)
    saves, the host page cache exclusive caching saves, and whether the
    host takes part in Shoot4U and split migrations.
    """

    def take_action(self, parsed_args):
        rows = self.app.client_manager.puma.list('hosts',
                                                 microversion=MICROVERSION)
        fields = res_fields.HOST
        return (res_fields.labels(fields),
                (utils.get_dict_properties(r, fields) for r in rows))
