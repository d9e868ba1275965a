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

"""Test double of the Puma scheduler's RPC endpoint.

The real service is puma_nova.scheduler (SchedulerService). This double
implements the same RPC API (topic puma-scheduler, version 1.5:
report_host with a PumaHostReport or statistics, plan_split with
supersede and source_host, get_ledger, release_split with main_host,
split_state; not release_entry) with an in-memory ledger and a fixed
choice of sub hosts, so that the functional tests can drive the compute
driver through real oslo.messaging calls on Nova's fake
transport. Given the real placement client (scheduler.placement), it
writes what a split lends to placement as the service does: when it
plans, and when an entry stops holding memory.
"""

import threading

from nova import rpc as nova_rpc
import oslo_messaging as messaging

from puma_nova import rpc


class PlanError(Exception):
    pass


class SchedulerDouble(object):

    target = messaging.Target(version='1.8')

    def __init__(self, sub_hosts, main_limits, placement=None):
        """A double that splits onto sub_hosts with fixed limits.

        Like the real service it keeps every split of a server (a server
        that moves again while split has two), moves the newest one
        through the states, releases the older ones when the newest is
        done, and release_split with a main host releases only that
        host's split.

        :param sub_hosts: hosts to use as sub hosts, in order
        :param main_limits: {main host: resident limit in MiB}
        :param placement: a scheduler.placement.PlacementLending
        """
        self.placement = placement
        self.sub_hosts = list(sub_hosts)
        self.main_limits = dict(main_limits)
        # Unreleased entries, oldest first.
        self.entries = []
        self.reports = {}
        self.calls = []
        # {instance uuid: the source host its last plan_split named}
        self.sources = {}
        self._lock = threading.Lock()
        # A puma_nova.compute.rpcapi.ComputeAPI: when set, superseded
        # plans get their memory server stopped, as the service does.
        self.compute = None

    @property
    def ledger(self):
        """{instance uuid: its newest unreleased entry}."""
        with self._lock:
            return {e['instance_uuid']: e for e in self.entries}

    def _of(self, instance_uuid):
        return [e for e in self.entries
                if e['instance_uuid'] == instance_uuid]

    def report_host(self, ctxt, host, stats=None, report=None):
        if report is not None:
            stats = report.to_stats()
        with self._lock:
            self.calls.append(('report_host', host))
            self.reports[host] = stats

    def plan_split(self, ctxt, instance_uuid, memory_mb, main_host,
                   project_id, supersede=False, source_host=None):
        superseded = []
        try:
            return self._plan(ctxt, instance_uuid, memory_mb, main_host,
                              supersede, superseded, source_host)
        finally:
            for e in superseded:
                if self.compute is not None:
                    self.compute.stop_memory_server(ctxt, e['sub_host'],
                                                    instance_uuid)

    def _plan(self, ctxt, instance_uuid, memory_mb, main_host, supersede,
              superseded, source_host):
        with self._lock:
            self.calls.append(('plan_split', instance_uuid, main_host))
            self.sources[instance_uuid] = source_host
            busy = {e['sub_host'] for e in self._of(instance_uuid)}
            for e in self._of(instance_uuid):
                if e['state'] != 'planned':
                    continue
                if e['main_host'] == main_host:
                    # Planned by puma-api; the destination asks again.
                    return {'sub_host': e['sub_host'],
                            'main_limit_mb': memory_mb - e['mb'],
                            'remote_mb': e['mb']}
                if not supersede:
                    raise PlanError('server %s already has a split '
                                    'migration planned to %s'
                                    % (instance_uuid, e['main_host']))
                # Left by an earlier attempt of this migration (1.3).
                self.calls.append(('superseded', instance_uuid,
                                   e['main_host']))
                self.entries.remove(e)
                if self.placement is not None:
                    self.placement.give_back(e['sub_host'], e['mb'])
                superseded.append(e)
            subs = [h for h in self.sub_hosts
                    if h not in (main_host, source_host) and h not in busy]
            limit = self.main_limits.get(main_host, 0)
            if not subs or limit <= 0 or limit >= memory_mb:
                raise PlanError('no sub host for %s' % instance_uuid)
            if self.placement is not None:
                try:
                    self.placement.lend(subs[0], memory_mb - limit)
                except Exception as e:
                    raise PlanError('cannot reserve %d MiB of sub host %s '
                                    'in placement: %s'
                                    % (memory_mb - limit, subs[0], e))
            entry = {'instance_uuid': instance_uuid, 'main_host': main_host,
                     'sub_host': subs[0], 'mb': memory_mb - limit,
                     'state': 'planned'}
            self.entries.append(entry)
            return {'sub_host': subs[0], 'main_limit_mb': limit,
                    'remote_mb': memory_mb - limit}

    def _give_back(self, before):
        """Give back what the entries of BEFORE no longer holding lent."""
        if self.placement is None:
            return
        holding = [id(e) for e in self.entries
                   if e['state'] in ('planned', 'running', 'done')]
        for e in before:
            if id(e) not in holding:
                self.placement.give_back(e['sub_host'], e['mb'])

    def _holding(self):
        return [e for e in self.entries
                if e['state'] in ('planned', 'running', 'done')]

    def get_ledger(self, ctxt, host):
        with self._lock:
            return [dict(e) for e in self.entries
                    if host in (e['main_host'], e['sub_host']) and
                    e['state'] in ('planned', 'running', 'done')]

    def release_split(self, ctxt, instance_uuid, main_host=None):
        with self._lock:
            self.calls.append(('release_split', instance_uuid, main_host))
            before = self._holding()
            self.entries = [
                e for e in self.entries
                if e['instance_uuid'] != instance_uuid or
                main_host not in (None, e['main_host'])]
            self._give_back(before)

    def split_state(self, ctxt, instance_uuid, state):
        with self._lock:
            self.calls.append(('split_state', instance_uuid, state))
            mine = self._of(instance_uuid)
            if not mine:
                return
            before = self._holding()
            mine[-1]['state'] = state
            if state == 'done':
                older = [id(e) for e in mine[:-1]]
                self.entries = [e for e in self.entries
                                if id(e) not in older]
            self._give_back(before)


def serve(endpoint):
    """Serve the double on Nova's (fake) transport; returns the server."""
    server = rpc.get_server(nova_rpc.TRANSPORT, rpc.SCHEDULER_TOPIC,
                            'puma-scheduler', [endpoint])
    server.start()
    return server
