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

"""Calls from nova-compute to the Puma scheduler service.

The methods and arguments are those of the scheduler's RPC contract
(``puma_nova.scheduler.rpcapi.SchedulerAPI``: topic ``puma-scheduler``,
version 1.0). Inside nova-compute they go over Nova's own transport and
context serializer, so no second transport has to be configured.
"""

import oslo_messaging as messaging

TOPIC = 'puma-scheduler'
VERSION = '1.0'


class SchedulerClient(object):

    def __init__(self, timeout=None):
        self._timeout = timeout
        self.__client = None

    @property
    def _client(self):
        # Nova initialises its transport after loading the driver.
        if self.__client is None:
            from nova import rpc as nova_rpc
            self.__client = nova_rpc.get_client(
                messaging.Target(topic=TOPIC, version=VERSION))
        return self.__client

    def _cctxt(self, timeout=None):
        timeout = timeout or self._timeout
        if timeout:
            return self._client.prepare(timeout=timeout)
        return self._client

    def report_host(self, ctxt, host, stats):
        return self._cctxt().call(ctxt, 'report_host', host=host,
                                  stats=stats)

    def plan_split(self, ctxt, instance_uuid, memory_mb, main_host,
                   project_id):
        return self._cctxt().call(
            ctxt, 'plan_split', instance_uuid=instance_uuid,
            memory_mb=memory_mb, main_host=main_host, project_id=project_id)

    def get_ledger(self, ctxt, host, timeout=None):
        return self._cctxt(timeout).call(ctxt, 'get_ledger', host=host)

    def release_split(self, ctxt, instance_uuid):
        return self._cctxt().call(ctxt, 'release_split',
                                  instance_uuid=instance_uuid)

    def split_state(self, ctxt, instance_uuid, state):
        return self._cctxt().call(ctxt, 'split_state',
                                  instance_uuid=instance_uuid, state=state)
