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
"""Client side of the puma-scheduler RPC API.

API version history:

    * 1.0 - Initial version: report_host, plan_split, get_ledger,
            release_split, split_state.
"""

from oslo_config import cfg
import oslo_messaging as messaging

from puma_nova import rpc

CONF = cfg.CONF

TOPIC = 'puma-scheduler'
RPC_API_VERSION = '1.0'


class SchedulerAPI(object):
    """Calls to puma-scheduler.  All arguments are JSON primitives."""

    VERSION_CAP = RPC_API_VERSION

    def __init__(self, transport=None, timeout=None):
        target = messaging.Target(topic=TOPIC, version=RPC_API_VERSION)
        self.client = rpc.get_client(transport or rpc.get_transport(CONF),
                                     target, version_cap=self.VERSION_CAP,
                                     timeout=timeout)

    def report_host(self, ctxt, host, stats):
        """Store the memory statistics of HOST and its VMs.

        STATS: memory_mb, free_mb, lendable_mb, address, shoot4u, split,
        vms (see docs/nova.md).
        """
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(ctxt, 'report_host', host=host, stats=stats)

    def plan_split(self, ctxt, instance_uuid, memory_mb, main_host,
                   project_id):
        """Plan (and record as 'planned') the split migration of a server.

        :returns: {'sub_host', 'main_limit_mb', 'remote_mb'}; sub_host is
            None when the server fits whole on MAIN_HOST.
        :raises: oslo_messaging.RemoteError wrapping PlanError.
        """
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(ctxt, 'plan_split', instance_uuid=instance_uuid,
                          memory_mb=memory_mb, main_host=main_host,
                          project_id=project_id)

    def get_ledger(self, ctxt, host):
        """Active ledger entries where HOST is the main or the sub host."""
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(ctxt, 'get_ledger', host=host)

    def release_split(self, ctxt, instance_uuid):
        """Release every active ledger entry of a server (idempotent)."""
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(ctxt, 'release_split', instance_uuid=instance_uuid)

    def split_state(self, ctxt, instance_uuid, state):
        """Move the server's split to 'running', 'done' or 'failed'."""
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(ctxt, 'split_state', instance_uuid=instance_uuid,
                          state=state)
