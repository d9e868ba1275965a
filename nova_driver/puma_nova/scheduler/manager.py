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
"""The puma-scheduler RPC endpoint and its planning round.

The manager is the only writer of plans: split-migration plans are made
under one lock, against host free memory minus what planned and running
splits already promised (db.api.ledger_commitments), so two plans can
never count the same free memory twice.

A planning round turns the latest host reports into a model.Cluster,
asks puma_nova.planning.lending for the pairs to keep, add and revoke,
stores the result, then gives every host whose set of pairs changed its
full new set (compute.rpcapi.ComputeAPI.apply_pairs).  A host that could not be
reached is tried again next round.

What a split lends is written to placement (scheduler.placement) by
the same code that writes the ledger: the sub host's MEMORY_MB reserved
grows when the split is planned, before the plan is recorded, and
shrinks when an entry stops holding memory (released, failed, or given
back after the server moved again).
"""

from concurrent import futures
import secrets

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import excutils

from puma_nova.db import api as db_api
from puma_nova.db import models
from puma_nova import exception
from puma_nova import lending_address
from puma_nova.objects import host_report
from puma_nova.planning import lending
from puma_nova.planning import model
from puma_nova.planning import split
from puma_nova.scheduler import failed_plans
from puma_nova.scheduler import placement as placement_client
from puma_nova.scheduler import schemas

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

PAGE_KB = 4
# Most apply_pairs calls in flight at once.
PUSH_THREADS = 16


def _vm_model(row):
    """A planner VM from a vm_stats row.

    A VM of unknown project neither lends nor borrows: pairs never cross
    projects.
    """
    opts = CONF.puma_scheduler
    known = row['project_id'] is not None
    lends = known and row['lendable']
    grace = known and not lends and row['lending_grace']
    demand = 0
    if known and not lends and row['cache_miss_rate'] >= \
            opts.miss_rate_threshold:
        demand = min(row['refaults'] * PAGE_KB // 1024, row['memory_mb'])
    return model.VM(uuid=row['uuid'], host=row['host'],
                    project=row['project_id'] or '', ram_mb=row['memory_mb'],
                    idle=lends, free_mb=row['free_mb'] if lends else 0,
                    cache_demand_mb=demand, lending_grace=grace)


def _ledger_view(entry):
    return {k: entry[k] for k in ('instance_uuid', 'main_host', 'sub_host',
                                  'mb', 'state')}


def _entry_view(entry):
    view = _ledger_view(entry)
    view['id'] = entry['id']
    return view


class SchedulerManager(object):
    """Endpoint of topic 'puma-scheduler' (see scheduler.rpcapi).

    :param compute_api: a puma_nova.compute.rpcapi.ComputeAPI.
    :param placement: a scheduler.placement.PlacementLending, or None to
        leave placement to the compute hosts' periodic updates.
    :param nova: a puma_nova.api.nova.NovaClient to read Nova's
        migration records with (release_failed_plans), or None.
    """

    target = messaging.Target(version='1.8')

    def __init__(self, compute_api, placement=None, nova=None):
        self.compute = compute_api
        self.placement = placement
        self.nova = nova
        # Nova could not be read at the last try: warned once.
        self._nova_away = False
        # One planner at a time, also across schedulers on one database.
        self._plan_lock = db_api.PlanGuard()
        # host -> the pair list it last accepted.
        self._pushed = {}

    def _live_hosts(self, ctxt):
        return db_api.host_list(
            ctxt, db_api.since(CONF.puma_scheduler.host_timeout))

    def _cluster(self, ctxt, with_pairs=False):
        hosts = self._live_hosts(ctxt)
        promised = db_api.ledger_commitments(ctxt)
        racks = CONF.puma_scheduler.host_racks
        mhosts = [model.Host(name=h['name'],
                             rack=racks.get(h['name'], h['name']),
                             ram_mb=h['memory_mb'],
                             free_mb=h['free_mb'] - promised.get(h['name'],
                                                                 0))
                  for h in hosts]
        vms = [_vm_model(v) for v in
               db_api.vm_list(ctxt, [h['name'] for h in hosts])]
        pairs = ()
        if with_pairs:
            pairs = [model.Pair(p['lender'], p['borrower'], p['capacity_mb'])
                     for p in db_api.pair_list(ctxt)]
        return model.Cluster.build(mhosts, vms, pairs), hosts

    # RPC API 1.8

    @messaging.expected_exceptions(exception.InvalidStats)
    def report_host(self, ctxt, host, stats=None, report=None):
        """REPORT (1.4, a PumaHostReport) or STATS (1.0, its dictionary)."""
        if report is not None:
            if not isinstance(report, host_report.PumaHostReport):
                raise exception.InvalidStats(
                    'report of host %s is not a PumaHostReport' % host)
            report.validate(host)
            stats = report.to_stats()
        elif stats is None:
            raise exception.InvalidStats(
                'report_host of %s carried neither report nor stats' % host)
        else:
            schemas.validate_stats(host, stats)
        db_api.host_report(ctxt, host, stats)

    @messaging.expected_exceptions(split.PlanError)
    def plan_split(self, ctxt, instance_uuid, memory_mb, main_host,
                   project_id, supersede=False, source_host=None):
        """Plan a split migration with MAIN_HOST as main host.

        :param supersede: the destination asks (1.3).  Nova checks one
            live migration of a server at a time, so a plan of the
            server with another main host belongs to an attempt Nova
            gave up after that host's checks (binding its ports failed,
            its answer was lost): it is released, its memory server
            stopped, and its sub host not used for this plan.
            Without it (puma-api), such a plan refuses.
        :param source_host: the host the server runs on (1.5), never
            its sub host; without it, the host whose last report lists
            the server (a server created since has none).
        """
        superseded = []
        try:
            with self._plan_lock:
                return self._plan_locked(ctxt, instance_uuid, memory_mb,
                                         main_host, project_id, supersede,
                                         superseded, source_host)
        finally:
            for entry in superseded:
                LOG.warning('Released the split plan of %(vm)s with main '
                            'host %(old)s: Nova now checks %(new)s',
                            {'vm': instance_uuid, 'old': entry['main_host'],
                             'new': main_host})
                # The destination waits for this answer: do not wait
                # long for a sub host that is down.
                self._stop_memory_server(
                    ctxt, entry,
                    timeout=min(5, CONF.puma_scheduler.rpc_timeout))

    def _plan_locked(self, ctxt, instance_uuid, memory_mb, main_host,
                     project_id, supersede, superseded, source_host):
        active = db_api.ledger_list(ctxt, instance_uuid=instance_uuid,
                                    active_only=True)
        for e in active:
            if e['state'] != models.PLANNED:
                continue
            if e['main_host'] == main_host:
                # The API planned it; the destination asks again.
                return {'sub_host': e['sub_host'],
                        'main_limit_mb': e['main_limit_mb'],
                        'remote_mb': e['mb']}
            if not supersede:
                raise split.PlanError(
                    'server %s already has a split migration planned to %s'
                    % (instance_uuid, e['main_host']))
            if self._release_locked(ctxt, instance_uuid,
                                    main_host=e['main_host'],
                                    entry_id=e['id'],
                                    states=(models.PLANNED,)):
                superseded.append(e)
        cluster, _hosts = self._cluster(ctxt)
        current = cluster.vms.get(instance_uuid)
        vm = model.VM(uuid=instance_uuid,
                      host=source_host or (current.host if current
                                           else None),
                      project=project_id, ram_mb=memory_mb)
        cluster = model.Cluster(cluster.hosts,
                                dict(cluster.vms, **{instance_uuid: vm}))
        opts = CONF.puma_scheduler
        # A host serves one memory server per server: the split the
        # server still runs with keeps its own, and a superseded plan's
        # may run until it is stopped.
        plan = split.plan_split(
            cluster, instance_uuid, main_host, reserve_mb=opts.reserve_mb,
            min_resident_ratio=opts.min_resident_ratio,
            exclude={e['sub_host'] for e in active})
        if plan is None:
            return {'sub_host': None, 'main_limit_mb': memory_mb,
                    'remote_mb': 0}
        # Placement first: a sub host it has no room on leaves nothing
        # behind (no entry, no memory server record).
        self._lend(plan.sub_host, plan.remote_mb, instance_uuid)
        try:
            db_api.ledger_create(ctxt, instance_uuid, project_id, main_host,
                                 plan.sub_host, plan.remote_mb,
                                 plan.resident_limit_mb)
        except Exception:
            with excutils.save_and_reraise_exception():
                self._give_back([{'instance_uuid': instance_uuid,
                                  'sub_host': plan.sub_host,
                                  'mb': plan.remote_mb}])
        db_api.memory_server_set(ctxt, instance_uuid,
                                 host=plan.sub_host,
                                 size_mb=plan.remote_mb,
                                 state='reserved', uri=None)
        LOG.info('Planned split migration of %(vm)s: %(res)d MiB on '
                 '%(main)s, %(rem)d MiB on %(sub)s',
                 {'vm': instance_uuid, 'res': plan.resident_limit_mb,
                  'main': main_host, 'rem': plan.remote_mb,
                  'sub': plan.sub_host})
        return {'sub_host': plan.sub_host,
                'main_limit_mb': plan.resident_limit_mb,
                'remote_mb': plan.remote_mb}

    def _lend(self, sub_host, mb, instance_uuid):
        """Reserve what a split lends on its sub host in placement.

        :raises PlanError: placement has no room on the sub host, or
            cannot be written.
        """
        if self.placement is None:
            return
        try:
            self.placement.lend(sub_host, mb)
        except placement_client.PlacementError as e:
            raise split.PlanError(
                'cannot reserve %d MiB of sub host %s in placement for the '
                'split of %s: %s' % (mb, sub_host, instance_uuid, e))

    def _give_back(self, entries):
        """Give back in placement what ENTRIES lent on their sub hosts.

        A failure is logged: the sub host's nova-compute puts placement
        right from the ledger at its periodic update
        (virt.ledger.ReservedKeeper).
        """
        if self.placement is None:
            return
        for e in entries:
            try:
                self.placement.give_back(e['sub_host'], e['mb'])
            except Exception as err:
                LOG.error('Could not give back the %(mb)d MiB the split of '
                          '%(vm)s reserved on %(host)s in placement; its '
                          'nova-compute corrects it: %(err)s',
                          {'mb': e['mb'], 'vm': e['instance_uuid'],
                           'host': e['sub_host'], 'err': err})

    @staticmethod
    def _holding(ctxt, instance_uuid):
        """{id: entry} of the server's entries that hold memory."""
        return {e['id']: e for e in db_api.ledger_list(
            ctxt, instance_uuid=instance_uuid, active_only=True)}

    def get_ledger(self, ctxt, host):
        return [_ledger_view(e) for e in
                db_api.ledger_list(ctxt, host=host, active_only=True)]

    def release_split(self, ctxt, instance_uuid, main_host=None):
        """Release the server's splits (only MAIN_HOST's if given, 1.1)."""
        with self._plan_lock:
            self._release_locked(ctxt, instance_uuid, main_host=main_host)

    @messaging.expected_exceptions(exception.NotFound, exception.Conflict)
    def release_entry(self, ctxt, entry_id):
        """Release one planned or failed ledger entry (1.2).

        What an operator does with a stale entry.  Running and done
        entries are in use and refused (InvalidTransition); a released
        one is left as it is.  The memory server the entry reserved is
        stopped on its sub host.

        :returns: the entry as it is now (with its id).
        """
        entry = db_api.ledger_get(ctxt, entry_id)
        if entry['state'] in (models.RUNNING, models.DONE):
            raise exception.InvalidTransition(
                'ledger entry %s of server %s is %s: the split is in use '
                'and is released when the server leaves %s'
                % (entry_id, entry['instance_uuid'], entry['state'],
                   entry['main_host']))
        self._release_stale(ctxt, entry)
        return _entry_view(db_api.ledger_get(ctxt, entry_id))

    def expire_plans(self, ctxt):
        """Release entries planned or failed longer than plan_ttl.

        The periodic task of the service: a migration that Nova refused
        or failed before the destination took it (no valid host, a
        failed precheck) leaves its plan; nothing else releases it.

        :returns: the entries released.
        """
        stale = db_api.ledger_stale(
            ctxt, db_api.since(CONF.puma_scheduler.plan_ttl))
        released = [e for e in stale if self._release_stale(ctxt, e)]
        if released:
            LOG.warning('Released %d stale split plan(s): %s', len(released),
                        ', '.join('%s (main host %s)' % (e['instance_uuid'],
                                                         e['main_host'])
                                  for e in released))
        return [_entry_view(e) for e in released]

    def release_failed_plans(self, ctxt):
        """Release planned and failed entries whose migration Nova failed.

        The periodic task's other half, before plan_ttl: for each such
        entry it reads the server's live-migration records in Nova and
        releases the entry (as expire_plans does) when the newest record
        changed since the entry was planned ended in failure and no live
        migration of the server is in progress (failed_plans).  While
        Nova cannot be read, it warns once and leaves the entries to
        plan_ttl.

        :returns: the entries released.
        """
        if self.nova is None:
            return []
        records = {}
        released = []
        for entry in db_api.ledger_stale(ctxt, db_api.utcnow()):
            uuid = entry['instance_uuid']
            if uuid not in records:
                try:
                    records[uuid] = self.nova.live_migrations(uuid)
                except Exception as e:
                    # Nova away, or refusing: the rest of this run would
                    # wait for it too.
                    self._nova_unreadable(e)
                    break
                self._nova_readable()
            failed = failed_plans.failed_migration(entry, records[uuid])
            if failed is None or not self._release_stale(ctxt, entry):
                continue
            LOG.warning('Released the split plan of %(vm)s (main host '
                        '%(main)s, ledger entry %(id)s): Nova\'s live '
                        'migration %(mig)s to %(dest)s ended %(status)s',
                        {'vm': uuid, 'main': entry['main_host'],
                         'id': entry['id'], 'mig': failed['uuid'],
                         'dest': failed['dest_compute'] or 'any host',
                         'status': failed['status']})
            released.append(entry)
        return [_entry_view(e) for e in released]

    def _nova_unreadable(self, error):
        if not self._nova_away:
            LOG.warning('Cannot read the live migrations of Nova; split '
                        'plans of failed migrations are released after '
                        'plan_ttl only until it answers: %s', error)
        else:
            LOG.debug('Nova still cannot be read: %s', error)
        self._nova_away = True

    def _nova_readable(self):
        if self._nova_away:
            LOG.info('Nova answers again: split plans of failed '
                     'migrations are released at once')
        self._nova_away = False

    def _release_stale(self, ctxt, entry):
        """Release a planned or failed entry, then stop its server.

        The same release as release_split's, limited to this entry and,
        in the same UPDATE, to the planned and failed states: a split
        whose migration started meanwhile is kept.
        """
        with self._plan_lock:
            count = self._release_locked(
                ctxt, entry['instance_uuid'], main_host=entry['main_host'],
                entry_id=entry['id'], states=models.STALE_STATES)
        if count:
            self._stop_memory_server(ctxt, entry)
        return count

    def _stop_memory_server(self, ctxt, entry, timeout=None):
        """Stop the memory server of a released plan on its sub host.

        The destination may have started it (idempotent; the sub host of
        a plan never serves another split of the server).
        """
        try:
            self.compute.stop_memory_server(ctxt, entry['sub_host'],
                                            entry['instance_uuid'],
                                            timeout=timeout)
        except Exception as e:
            LOG.warning('Could not stop the memory server of %(vm)s on '
                        '%(host)s: %(err)s',
                        {'vm': entry['instance_uuid'],
                         'host': entry['sub_host'], 'err': e})

    def _release_locked(self, ctxt, instance_uuid, main_host=None,
                        entry_id=None, states=None):
        holding = self._holding(ctxt, instance_uuid)
        count = db_api.ledger_release(ctxt, instance_uuid,
                                      main_host=main_host, entry_id=entry_id,
                                      states=states)
        kept = self._holding(ctxt, instance_uuid)
        self._give_back([e for i, e in holding.items() if i not in kept])
        if count:
            LOG.info('Released split migration of %(vm)s (main host '
                     '%(main)s)', {'vm': instance_uuid,
                                   'main': main_host or 'any'})
        # One memory server record per server: it follows the split
        # that still holds memory, if any.
        kept = list(kept.values())
        if not any(ms['instance_uuid'] == instance_uuid
                   for ms in db_api.memory_server_list(ctxt)):
            return count
        if not kept:
            db_api.memory_server_set(ctxt, instance_uuid,
                                     state='stopped')
            return count
        entry = kept[-1]
        db_api.memory_server_set(
            ctxt, instance_uuid, host=entry['sub_host'],
            size_mb=entry['mb'],
            state='reserved' if entry['state'] == models.PLANNED
            else 'active')
        return count

    @messaging.expected_exceptions(exception.Invalid, exception.NotFound,
                                   exception.Conflict)
    def split_state(self, ctxt, instance_uuid, state):
        if state not in (models.RUNNING, models.DONE, models.FAILED):
            raise exception.Invalid(
                'split_state accepts running, done or failed, not %r' %
                (state,))
        with self._plan_lock:
            holding = self._holding(ctxt, instance_uuid)
            entry = db_api.ledger_set_state(ctxt, instance_uuid, state)
            if state == models.DONE:
                # The server left the hosts of its previous split.
                db_api.ledger_release(ctxt, instance_uuid,
                                      before_id=entry['id'])
            # A failed split and the previous split of a server that is
            # done moving hold no memory any more.
            kept = self._holding(ctxt, instance_uuid)
            self._give_back([e for i, e in holding.items()
                             if i not in kept])
            if state == models.RUNNING:
                db_api.memory_server_set(ctxt, instance_uuid,
                                         host=entry['sub_host'],
                                         state='active')

    # Planning rounds

    def run_planning_round(self, ctxt):
        """Plan pairs, store them, push changed sets; return the Plan."""
        opts = CONF.puma_scheduler
        with self._plan_lock:
            cluster, hosts = self._cluster(ctxt, with_pairs=True)
            plan = lending.plan_pairs(
                cluster, min_lend_mb=opts.min_lend_mb,
                max_per_borrower_mb=opts.max_per_borrower_mb)
            new = []
            for p in plan.new:
                lhost = cluster.vms[p.lender].host
                bhost = cluster.vms[p.borrower].host
                new.append({'lender': p.lender, 'borrower': p.borrower,
                            'lender_host': lhost, 'borrower_host': bhost,
                            'capacity_mb': p.mb,
                            'key': secrets.token_hex(16)})
            db_api.pair_update(ctxt,
                               [(p.lender, p.borrower) for p in plan.revoke],
                               new)
            stored = db_api.pair_list(ctxt)
        if plan.new or plan.revoke:
            LOG.info('Planning round: %d pairs kept, %d new, %d revoked',
                     len(plan.keep), len(plan.new), len(plan.revoke))
        self._push(ctxt, stored, plan.revoke, cluster)
        return plan

    def _push(self, ctxt, stored, revoked, cluster):
        desired = {}
        for p in stored:
            # The instances' own addresses on the lending channel, which
            # the hosts' filters let through and the guests connect to.
            item = {'borrower': p['borrower'], 'lender': p['lender'],
                    'lender_address': lending_address.address(p['lender']),
                    'borrower_address': lending_address.address(
                        p['borrower']),
                    'capacity_mb': p['capacity_mb'], 'key': p['key']}
            for h in {p['lender_host'], p['borrower_host']}:
                desired.setdefault(h, []).append(item)
        # Hosts that lost a pair must hear it even if they have none left.
        for p in revoked:
            for uuid in (p.lender, p.borrower):
                vm = cluster.vms.get(uuid)
                if vm is not None:
                    desired.setdefault(vm.host, [])
        for host in set(self._pushed) - set(desired):
            if self._pushed[host]:
                desired[host] = []
        todo = {}
        for host in sorted(desired):
            pairs = sorted(desired[host],
                           key=lambda i: (i['lender'], i['borrower']))
            if self._pushed.get(host) != pairs:
                todo[host] = pairs
        if not todo:
            return
        # In parallel: one unreachable host costs one rpc_timeout, not one
        # per host.
        with futures.ThreadPoolExecutor(min(PUSH_THREADS, len(todo))) as ex:
            calls = {host: ex.submit(self.compute.apply_pairs, ctxt, host,
                                     pairs) for host, pairs in todo.items()}
        for host, call in sorted(calls.items()):
            try:
                call.result()
            except messaging.MessagingException as e:
                LOG.warning('Host %(host)s did not take its %(n)d pairs, '
                            'next round tries again: %(err)s',
                            {'host': host, 'n': len(todo[host]), 'err': e})
                continue
            self._pushed[host] = todo[host]
