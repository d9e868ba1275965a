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

"""Client of the Puma RPC endpoint served inside each nova-compute.

Target: topic ``puma-compute``, server = the Nova host name, version 1.0.
Arguments and results are JSON primitives. Inside nova-compute the client
uses Nova's transport and context serializer; elsewhere (the Puma
scheduler) pass a transport.
"""

import oslo_messaging as messaging

TOPIC = 'puma-compute'
VERSION = '1.0'


class _ContextSerializer(messaging.NoOpSerializer):
    """Sends a request context as the dict oslo.messaging expects."""

    def serialize_context(self, context):
        to_dict = getattr(context, 'to_dict', None)
        return to_dict() if to_dict else context


def _nova_transport():
    try:
        from nova import rpc as nova_rpc
    except ImportError:
        return None
    return nova_rpc.TRANSPORT


class ComputeAPI(object):
    """Calls to the Puma endpoint of one compute host.

    Methods of version 1.0:

    * start_memory_server(ctxt, host, instance_uuid, size_mb)
      -> {'uri': 'tcp:ADDR:PORT'}, idempotent per instance
    * stop_memory_server(ctxt, host, instance_uuid) -> None, idempotent
    * apply_pairs(ctxt, host, pairs) -> None
    * get_memory_stats(ctxt, host) -> stats dict as in report_host
    * get_split_plan(ctxt, host, instance_uuid, migration_uuid)
      -> plan dict or None
    * drop_split_plan(ctxt, host, instance_uuid) -> None
      (both used between compute hosts: the source of a live migration
      asks the destination for the split plan it made, and makes it
      forget the plan after a rollback)
    """

    def __init__(self, transport=None, timeout=None):
        target = messaging.Target(topic=TOPIC, version=VERSION)
        nova_transport = _nova_transport()
        if transport is None and nova_transport is not None:
            from nova import rpc as nova_rpc
            self._client = nova_rpc.get_client(target)
        else:
            if transport is None:
                raise RuntimeError('ComputeAPI needs an oslo.messaging '
                                   'transport outside nova-compute')
            self._client = messaging.get_rpc_client(
                transport, target, serializer=_ContextSerializer())
        self._timeout = timeout

    def _prepare(self, host):
        if self._timeout:
            return self._client.prepare(server=host, timeout=self._timeout)
        return self._client.prepare(server=host)

    def start_memory_server(self, ctxt, host, instance_uuid, size_mb):
        return self._prepare(host).call(
            ctxt, 'start_memory_server', instance_uuid=instance_uuid,
            size_mb=size_mb)

    def stop_memory_server(self, ctxt, host, instance_uuid):
        return self._prepare(host).call(
            ctxt, 'stop_memory_server', instance_uuid=instance_uuid)

    def apply_pairs(self, ctxt, host, pairs):
        return self._prepare(host).call(ctxt, 'apply_pairs', pairs=pairs)

    def get_memory_stats(self, ctxt, host):
        return self._prepare(host).call(ctxt, 'get_memory_stats')

    def get_split_plan(self, ctxt, host, instance_uuid, migration_uuid=None):
        return self._prepare(host).call(
            ctxt, 'get_split_plan', instance_uuid=instance_uuid,
            migration_uuid=migration_uuid)

    def drop_split_plan(self, ctxt, host, instance_uuid):
        return self._prepare(host).call(
            ctxt, 'drop_split_plan', instance_uuid=instance_uuid)
