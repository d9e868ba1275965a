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

The only client of topic 'puma-scheduler': nova-compute (the Puma
driver, on Nova's transport) and puma-api use it.

API version history:

    * 1.0 - Initial version: report_host, plan_split, get_ledger,
            release_split, split_state.
    * 1.1 - release_split takes main_host: release only the split whose
            main host that is (a rolled back move of a server that is
            split already must not release the split it still uses).
    * 1.2 - release_entry: release one planned or failed ledger entry
            (operators, stale plans).
    * 1.3 - plan_split takes supersede: the destination host, checked
            by Nova now, releases a plan another main host holds for
            the same server (left by an earlier attempt) instead of
            being refused.
    * 1.4 - report_host takes 'report', a PumaHostReport versioned
            object, instead of the 'stats' dictionary (still accepted).
    * 1.5 - plan_split takes source_host: the host the server runs on,
            which is never its sub host (the server's own host report
            may not list it yet).
    * 1.6 - report_host's 'report' may be a PumaHostReport 1.1 (with
            merged_mb); below 1.6 it is sent as version 1.0.
    * 1.7 - report_host's 'report' may be a PumaHostReport 1.2 (its VMs'
            lending_grace); below 1.7 it is sent as version 1.1.
    * 1.8 - report_host's 'report' may be a PumaHostReport 1.3 (with
            cache_saved_mb); below 1.8 it is sent as version 1.2.
"""

from oslo_config import cfg

from puma_nova.conf import upgrade_levels
from puma_nova import exception
from puma_nova.objects import host_report
from puma_nova import rpc

CONF = cfg.CONF
upgrade_levels.register_opts(CONF)

RPC_API_VERSION = '1.8'


class SchedulerAPI(object):
    """Calls to puma-scheduler.  All arguments are JSON primitives.

    :param transport: oslo.messaging transport (default: the one of
        [DEFAULT] transport_url; nova-compute passes Nova's own).
    :param timeout: seconds to wait for an answer (default: oslo's).
    :param version_cap: newest version to send, for rolling upgrades
        (default: [upgrade_levels] puma_scheduler, else RPC_API_VERSION).
    """

    def __init__(self, transport=None, timeout=None, version_cap=None):
        cap = (version_cap or CONF.upgrade_levels.puma_scheduler or
               RPC_API_VERSION)
        self.client = rpc.get_client(
            transport or rpc.get_transport(CONF), rpc.SCHEDULER_TOPIC, '1.0',
            version_cap=cap, timeout=timeout)

    def _prepare(self, version, timeout=None):
        if timeout:
            return self.client.prepare(version=version, timeout=timeout)
        return self.client.prepare(version=version)

    def report_host(self, ctxt, host, stats):
        """Store the memory statistics of HOST and its VMs.

        STATS: a PumaHostReport, or its dictionary (memory_mb, free_mb,
        lendable_mb, merged_mb, cache_saved_mb, address, shoot4u, split,
        vms; see docs/nova-scheduler.md).  Sent as the object (1.8; as its
        version 1.2 under a cap of 1.7, 1.1 under 1.6, 1.0 under 1.4 or
        1.5), or as the
        dictionary to a scheduler capped below 1.4.

        :raises: InvalidStats (here, before anything is sent) for a
            dictionary the scheduler would refuse.
        """
        report = stats
        if not isinstance(report, host_report.PumaHostReport):
            report = host_report.PumaHostReport.from_stats(host, stats)
        if self.client.can_send_version('1.8'):
            cctxt = self._prepare('1.8')
            return cctxt.call(ctxt, 'report_host', host=host, report=report)
        if self.client.can_send_version('1.7'):
            # A scheduler of 1.7 knows PumaHostReport 1.2.
            cctxt = self._prepare('1.7')
            return cctxt.call(ctxt, 'report_host', host=host,
                              report=report.obj_to_primitive(
                                  target_version='1.2'))
        if self.client.can_send_version('1.6'):
            # A scheduler of 1.6 knows PumaHostReport 1.1 (VMs 1.0).
            cctxt = self._prepare('1.6')
            return cctxt.call(ctxt, 'report_host', host=host,
                              report=report.obj_to_primitive(
                                  target_version='1.1'))
        if self.client.can_send_version('1.4'):
            # A scheduler of 1.4 or 1.5 knows PumaHostReport 1.0 only:
            # the object goes in its 1.0 wire form (the serializer passes
            # a primitive through as it is).
            cctxt = self._prepare('1.4')
            return cctxt.call(ctxt, 'report_host', host=host,
                              report=report.obj_to_primitive(
                                  target_version='1.0'))
        cctxt = self._prepare('1.0')
        return cctxt.call(ctxt, 'report_host', host=host,
                          stats=report.to_stats())

    def plan_split(self, ctxt, instance_uuid, memory_mb, main_host,
                   project_id, supersede=False, source_host=None):
        """Plan (and record as 'planned') the split migration of a server.

        :param supersede: the caller is the destination host Nova is
            checking (only Nova's checks set it, never puma-api): a plan
            of the server with another main host was left by an earlier
            attempt and is released (1.3; under a lower version cap the
            call is made without it, and such a plan refuses).
        :param source_host: the host the server runs on now (Nova's
            record), never chosen as its sub host (1.5; under a lower
            version cap the scheduler knows the source only from the
            hosts' reports).
        :returns: {'sub_host', 'main_limit_mb', 'remote_mb'}; sub_host is
            None when the server fits whole on MAIN_HOST.
        :raises: oslo_messaging.RemoteError wrapping PlanError.
        """
        kwargs = {}
        version = '1.0'
        if supersede and self.client.can_send_version('1.3'):
            version = '1.3'
            kwargs['supersede'] = True
        if source_host and self.client.can_send_version('1.5'):
            version = '1.5'
            kwargs['source_host'] = source_host
        cctxt = self._prepare(version)
        return cctxt.call(ctxt, 'plan_split', instance_uuid=instance_uuid,
                          memory_mb=memory_mb, main_host=main_host,
                          project_id=project_id, **kwargs)

    def get_ledger(self, ctxt, host, timeout=None):
        """Active ledger entries where HOST is the main or the sub host.

        :param timeout: seconds to wait for this call only (the resource
            tracker reads the ledger and must not hang on it).
        """
        cctxt = self._prepare('1.0', timeout=timeout)
        return cctxt.call(ctxt, 'get_ledger', host=host)

    def release_split(self, ctxt, instance_uuid, main_host=None):
        """Release ledger entries of a server (idempotent).

        :param main_host: only the entries whose main host this is (a
            migration that rolls back releases what it reserved, nothing
            else); None releases every entry (the server is deleted).
        :raises: SchedulerTooOld if main_host is given and the version cap
            is below 1.1: releasing everything instead would drop a split
            still in use.
        """
        if main_host is None:
            cctxt = self._prepare('1.0')
            return cctxt.call(ctxt, 'release_split',
                              instance_uuid=instance_uuid)
        if not self.client.can_send_version('1.1'):
            raise exception.SchedulerTooOld(
                'puma-scheduler RPC API is capped below 1.1: cannot '
                'release only the split of %s with main host %s'
                % (instance_uuid, main_host))
        cctxt = self._prepare('1.1')
        return cctxt.call(ctxt, 'release_split', instance_uuid=instance_uuid,
                          main_host=main_host)

    def release_entry(self, ctxt, entry_id):
        """Release one planned or failed ledger entry (1.2).

        :returns: the entry (id, instance_uuid, main_host, sub_host, mb,
            state).
        :raises: LedgerNotFound; InvalidTransition for a running or done
            entry (as RemoteError over a real bus); SchedulerTooOld if
            the version cap is below 1.2.
        """
        if not self.client.can_send_version('1.2'):
            raise exception.SchedulerTooOld(
                'puma-scheduler RPC API is capped below 1.2: cannot '
                'release ledger entry %s' % entry_id)
        cctxt = self._prepare('1.2')
        return cctxt.call(ctxt, 'release_entry', entry_id=entry_id)

    def split_state(self, ctxt, instance_uuid, state):
        """Move the server's newest split to 'running', 'done' or 'failed'."""
        cctxt = self._prepare('1.0')
        return cctxt.call(ctxt, 'split_state', instance_uuid=instance_uuid,
                          state=state)
