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

"""Client side of the puma-compute RPC API (served inside nova-compute).

The only client of topic 'puma-compute': puma-scheduler uses it (memory
servers, pairs, statistics) and so does the Puma driver between compute
hosts (split plans). Every call goes to one host (server = its Nova host
name).

API version history:

    * 1.0 - Initial version: start_memory_server, stop_memory_server,
            apply_pairs, get_memory_stats (the contract with the
            scheduler); get_split_plan, drop_split_plan (between compute
            hosts: the source of a live migration asks the destination
            for the split plan it made, and makes it forget the plan after
            a rollback).
    * 1.1 - start_memory_server takes 'clients', the Nova hosts whose
            x509 client certificates the instance's memory server
            accepts (with TLS).
    * 1.2 - apply_pairs takes PumaLendingPair versioned objects instead
            of dictionaries (still accepted).
"""

from oslo_config import cfg

from puma_nova.compute import lending
from puma_nova.conf import upgrade_levels
from puma_nova.objects import lending_pair
from puma_nova import rpc

CONF = cfg.CONF
upgrade_levels.register_opts(CONF)

RPC_API_VERSION = '1.2'


class ComputeAPI(object):
    """Calls to the Puma endpoint of one compute host.

    :param transport: oslo.messaging transport (default: the one of
        [DEFAULT] transport_url; nova-compute passes Nova's own).
    :param timeout: seconds to wait for an answer (default: oslo's).
    :param version_cap: newest version to send, for rolling upgrades
        (default: [upgrade_levels] puma_compute, else RPC_API_VERSION).
    """

    def __init__(self, transport=None, timeout=None, version_cap=None):
        cap = (version_cap or CONF.upgrade_levels.puma_compute or
               RPC_API_VERSION)
        self.client = rpc.get_client(
            transport or rpc.get_transport(CONF), rpc.COMPUTE_TOPIC, '1.0',
            version_cap=cap, timeout=timeout)

    def start_memory_server(self, ctxt, host, instance_uuid, size_mb,
                            clients=None):
        """Serve SIZE_MB of the instance's memory from HOST.

        :param clients: Nova host names that may reach the server (the
            source and destination of the split migration); with TLS the
            server accepts only their certificates. Not sent to a host
            older than 1.1, which then accepts every certified host.
        :returns: {'uri': 'tcp:ADDR:PORT'}; idempotent per instance.
        """
        args = {'instance_uuid': instance_uuid, 'size_mb': size_mb}
        version = '1.0'
        if clients and self.client.can_send_version('1.1'):
            version = '1.1'
            args['clients'] = sorted(clients)
        cctxt = self.client.prepare(server=host, version=version)
        return cctxt.call(ctxt, 'start_memory_server', **args)

    def stop_memory_server(self, ctxt, host, instance_uuid, timeout=None):
        """Stop the instance's memory server on HOST (idempotent).

        :param timeout: seconds to wait for HOST (default: the client's).
        """
        if timeout:
            cctxt = self.client.prepare(server=host, version='1.0',
                                        timeout=timeout)
        else:
            cctxt = self.client.prepare(server=host, version='1.0')
        return cctxt.call(ctxt, 'stop_memory_server',
                          instance_uuid=instance_uuid)

    def apply_pairs(self, ctxt, host, pairs):
        """Give HOST the full set of its VMs' pairs (absent = unpaired).

        PAIRS: PumaLendingPair objects or their dictionaries; sent as
        objects (1.2), or as dictionaries to a host capped below 1.2.

        :raises: InvalidPairs (here, before anything is sent) for
            dictionaries the host would refuse.
        """
        pairs = [p.to_dict() if isinstance(p, lending_pair.PumaLendingPair)
                 else p for p in pairs]
        pairs = [lending_pair.PumaLendingPair.from_dict(p)
                 for p in lending.validate(pairs)]
        if self.client.can_send_version('1.2'):
            cctxt = self.client.prepare(server=host, version='1.2')
            return cctxt.call(ctxt, 'apply_pairs', pairs=pairs)
        cctxt = self.client.prepare(server=host, version='1.0')
        return cctxt.call(ctxt, 'apply_pairs',
                          pairs=[p.to_dict() for p in pairs])

    def get_memory_stats(self, ctxt, host):
        """HOST's memory statistics, as report_host sends them."""
        cctxt = self.client.prepare(server=host, version='1.0')
        return cctxt.call(ctxt, 'get_memory_stats')

    def get_split_plan(self, ctxt, host, instance_uuid, migration_uuid=None):
        """The split plan HOST made as destination, or None.

        :param migration_uuid: only a plan made for this migration.
        """
        cctxt = self.client.prepare(server=host, version='1.0')
        return cctxt.call(ctxt, 'get_split_plan',
                          instance_uuid=instance_uuid,
                          migration_uuid=migration_uuid)

    def drop_split_plan(self, ctxt, host, instance_uuid):
        """Make HOST forget its split plan of the instance (idempotent)."""
        cctxt = self.client.prepare(server=host, version='1.0')
        return cctxt.call(ctxt, 'drop_split_plan',
                          instance_uuid=instance_uuid)
