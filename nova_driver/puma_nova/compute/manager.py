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

"""The Puma RPC endpoint of a compute host.

Served by puma-compute-agent (cmd.compute_agent) on Nova's transport,
topic ``puma-compute``, server = this host, in front of its
compute.agent.ComputeAgent.
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from puma_nova.compute import lending
from puma_nova.compute import memory_server
from puma_nova.objects import lending_pair

LOG = logging.getLogger(__name__)


class PumaComputeEndpoint(object):
    """Endpoint of topic 'puma-compute' (see compute.rpcapi)."""

    target = messaging.Target(version='1.2')

    def __init__(self, agent):
        self._agent = agent

    # Refusals the caller gets as a RemoteError naming them; not logged
    # with a traceback by oslo.messaging.

    @messaging.expected_exceptions(memory_server.MemoryServerError)
    def start_memory_server(self, ctxt, instance_uuid, size_mb,
                            clients=None):
        try:
            uri = self._agent.start_memory_server(instance_uuid, size_mb,
                                                  clients)
        except memory_server.MemoryServerError as e:
            LOG.error('Memory server for %s not started: %s',
                      instance_uuid, e)
            raise
        return {'uri': uri}

    def stop_memory_server(self, ctxt, instance_uuid):
        self._agent.stop_memory_server(instance_uuid)

    @messaging.expected_exceptions(lending.InvalidPairs)
    def apply_pairs(self, ctxt, pairs):
        """PAIRS: PumaLendingPair objects (1.2) or dictionaries (1.0)."""
        if isinstance(pairs, list):
            pairs = [p.to_dict()
                     if isinstance(p, lending_pair.PumaLendingPair) else p
                     for p in pairs]
        self._agent.apply_pairs(pairs)

    def get_memory_stats(self, ctxt):
        return self._agent.memory_stats()

    def get_split_plan(self, ctxt, instance_uuid, migration_uuid=None):
        return self._agent.split_plan(instance_uuid, migration_uuid)

    def drop_split_plan(self, ctxt, instance_uuid):
        self._agent.drop_split_plan(instance_uuid)
