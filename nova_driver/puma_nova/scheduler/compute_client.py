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
"""Scheduler-side client of the compute hosts' RPC API (topic puma-compute).

Only the call the scheduler makes, apply_pairs, at the wire level of the
contract (Target(topic='puma-compute', server=<host>, version='1.0')).
"""

from oslo_config import cfg
import oslo_messaging as messaging

from puma_nova import rpc

CONF = cfg.CONF

TOPIC = 'puma-compute'


class ComputeClient(object):

    def __init__(self, transport):
        target = messaging.Target(topic=TOPIC, version='1.0')
        self.client = rpc.get_client(transport, target, version_cap='1.0')

    def apply_pairs(self, ctxt, host, pairs):
        """Give HOST the full set of its VMs' pairs (absent = unpaired)."""
        cctxt = self.client.prepare(
            server=host, version='1.0',
            timeout=CONF.puma_scheduler.rpc_timeout)
        return cctxt.call(ctxt, 'apply_pairs', pairs=pairs)
