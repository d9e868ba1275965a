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
"""puma-scheduler's RPC API and planning rounds over an in-process bus."""

import datetime
import functools
import logging
from unittest import mock

import fixtures

from puma_nova.api import nova
from puma_nova.compute import rpcapi as compute_rpcapi
from puma_nova.db import api as db_api
from puma_nova.db import models
from puma_nova import exception
from puma_nova import lending_address
from puma_nova.objects import host_report
from puma_nova import rpc
from puma_nova.scheduler import manager
from puma_nova.scheduler import rpcapi
from puma_nova.scheduler import service
from puma_nova.tests.unit.sched import base

NOVA_CLIENT = service.nova_client


class TestSchedulerRPC(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='puma_scheduler', planning_interval=3600,
                   reserve_mb=512, host_racks={'m': 'r1', 'near': 'r1'})
        self.rpc = self.useFixture(base.RPCFixture(['m', 'near', 'far']))
        self.api = self.rpc.api
        self.api.report_host(self.ctxt, 'src', base.stats(
            1000, [base.vm('i1', memory_mb=8192)]))
        self.api.report_host(self.ctxt, 'm', base.stats(4608))
        self.api.report_host(self.ctxt, 'near', base.stats(6000))
        self.api.report_host(self.ctxt, 'far', base.stats(30000))

    def test_plan_prefers_the_main_hosts_rack_and_is_recorded(self):
        plan = self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.assertEqual({'sub_host': 'near', 'main_limit_mb': 4096,
                          'remote_mb': 4096}, plan)
        # The destination asks again for the same migration: same plan.
        self.assertEqual(plan, self.api.plan_split(self.ctxt, 'i1', 8192,
                                                   'm', 'p1'))
        self.assertEqual([{'instance_uuid': 'i1', 'main_host': 'm',
                           'sub_host': 'near', 'mb': 4096,
                           'state': 'planned'}],
                         self.api.get_ledger(self.ctxt, 'near'))
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'far'))

    def test_promised_memory_is_not_planned_twice(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.report_host(self.ctxt, 'm2', base.stats(4608))
        plan = self.api.plan_split(self.ctxt, 'i2', 8192, 'm2', 'p1')
        # 'near' has 6000 - 4096 promised left: the far host takes it.
        self.assertEqual('far', plan['sub_host'])

    def test_fits_whole_records_nothing(self):
        plan = self.api.plan_split(self.ctxt, 'i1', 8192, 'far', 'p1')
        self.assertEqual({'sub_host': None, 'main_limit_mb': 8192,
                          'remote_mb': 0}, plan)
        self.assertEqual([], db_api.ledger_list(self.ctxt))

    def test_no_sub_host_is_a_plan_error(self):
        name, msg = base.rpc_error(self, self.api.plan_split, self.ctxt,
                                   'i1', 40000, 'far', 'p1')
        self.assertEqual('PlanError', name)
        self.assertIn('no host can hold', msg)
        self.assertEqual([], db_api.ledger_list(self.ctxt))

    def test_state_machine_over_rpc(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        ms = db_api.memory_server_list(self.ctxt)
        self.assertEqual([('i1', 'near', 4096, 'active')],
                         [(m['instance_uuid'], m['host'], m['size_mb'],
                           m['state']) for m in ms])
        name, _msg = base.rpc_error(self, self.api.split_state, self.ctxt,
                                    'i1', 'planned')
        self.assertEqual('Invalid', name)
        self.api.split_state(self.ctxt, 'i1', 'done')
        self.api.release_split(self.ctxt, 'i1')
        self.api.release_split(self.ctxt, 'i1')
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'm'))
        self.assertEqual('stopped',
                         db_api.memory_server_list(self.ctxt)[0]['state'])
        name, _msg = base.rpc_error(self, self.api.split_state, self.ctxt,
                                    'i1', 'done')
        self.assertEqual('LedgerNotFound', name)

    def test_moving_again_releases_the_previous_split_when_done(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.api.split_state(self.ctxt, 'i1', 'done')
        self.api.report_host(self.ctxt, 'm2', base.stats(4608))
        second = self.api.plan_split(self.ctxt, 'i1', 8192, 'm2', 'p1')

        def states():
            return [(e['main_host'], e['state']) for e in
                    db_api.ledger_list(self.ctxt, instance_uuid='i1')]

        # The old split holds its memory until the new one is done...
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.assertEqual([('m', 'done'), ('m2', 'running')], states())
        self.api.split_state(self.ctxt, 'i1', 'done')
        self.assertEqual([('m', 'released'), ('m2', 'done')], states())
        self.assertEqual([second['sub_host']],
                         [e['sub_host'] for e in
                          self.api.get_ledger(self.ctxt, 'm2')])

    def test_failed_second_move_keeps_the_first_split(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.api.split_state(self.ctxt, 'i1', 'done')
        self.api.report_host(self.ctxt, 'm2', base.stats(4608))
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm2', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'failed')
        self.assertEqual(['done', 'failed'],
                         [e['state'] for e in db_api.ledger_list(
                             self.ctxt, instance_uuid='i1')])

    def test_rollback_of_second_move_releases_only_its_split(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.api.split_state(self.ctxt, 'i1', 'done')
        # The server now runs on m.
        self.api.report_host(self.ctxt, 'src', base.stats(9000))
        self.api.report_host(self.ctxt, 'm', base.stats(
            500, [base.vm('i1', memory_mb=8192)]))
        self.api.report_host(self.ctxt, 'm2', base.stats(4608))
        # m2's rack neighbour 'near' would be the sub host, but it still
        # serves the first split.
        self.flags(group='puma_scheduler',
                   host_racks={'m': 'r1', 'near': 'r1', 'm2': 'r1'})
        second = self.api.plan_split(self.ctxt, 'i1', 8192, 'm2', 'p1')
        self.assertEqual('far', second['sub_host'])
        self.api.split_state(self.ctxt, 'i1', 'failed')
        # What the driver's rollback does: release what the move to m2
        # reserved, twice (source and destination both roll back).
        self.api.release_split(self.ctxt, 'i1', main_host='m2')
        self.api.release_split(self.ctxt, 'i1', main_host='m2')
        self.assertEqual([('m', 'done'), ('m2', 'released')],
                         [(e['main_host'], e['state']) for e in
                          db_api.ledger_list(self.ctxt,
                                             instance_uuid='i1')])
        self.assertEqual([('i1', 'm', 'near', 4096, 'done')],
                         [(e['instance_uuid'], e['main_host'],
                           e['sub_host'], e['mb'], e['state'])
                          for e in self.api.get_ledger(self.ctxt, 'near')])
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'm2'))
        # The memory server record follows the split still in use.
        self.assertEqual([('i1', 'near', 4096, 'active')],
                         [(m['instance_uuid'], m['host'], m['size_mb'],
                           m['state'])
                          for m in db_api.memory_server_list(self.ctxt)])
        # Deleting the server releases everything left.
        self.api.release_split(self.ctxt, 'i1')
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'near'))
        self.assertEqual(['stopped'],
                         [m['state']
                          for m in db_api.memory_server_list(self.ctxt)])

    def test_destination_supersedes_a_plan_an_earlier_attempt_left(self):
        # Nova gave 'm' up after its checks passed (binding the ports
        # on 'm' failed, or its answer was lost) and now checks 'm2' for
        # the same migration: Nova checks one live migration of a server
        # at a time, so the plan with 'm' is left over.
        self.flags(group='puma_scheduler',
                   host_racks={'m': 'r1', 'near': 'r1', 'm2': 'r1'})
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.report_host(self.ctxt, 'm2', base.stats(4608))
        # puma-api (no supersede) is still refused.
        name, msg = base.rpc_error(self, self.api.plan_split, self.ctxt,
                                   'i1', 8192, 'm2', 'p1')
        self.assertEqual('PlanError', name)
        self.assertIn('already has a split migration planned to m', msg)
        plan = self.api.plan_split(self.ctxt, 'i1', 8192, 'm2', 'p1',
                                   supersede=True)
        # Not 'near' (the rack's host with the most free memory): the
        # old plan's memory server may still run there until stopped.
        self.assertNotIn(plan['sub_host'], ('near', 'm2'))
        self.assertEqual([('m', 'released'), ('m2', 'planned')],
                         [(e['main_host'], e['state'])
                          for e in db_api.ledger_list(self.ctxt)])
        self.assertEqual(['i1'], self.rpc.computes['near'].stopped)
        self.assertEqual([('i1', plan['sub_host'], 'reserved')],
                         [(m['instance_uuid'], m['host'], m['state'])
                          for m in db_api.memory_server_list(self.ctxt)])

    def test_supersede_keeps_splits_in_use_and_needs_version_1_3(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.report_host(self.ctxt, 'm2', base.stats(4608))
        old = rpcapi.SchedulerAPI(self.rpc.transport, version_cap='1.2')
        # An older scheduler: plan_split as before, nothing superseded.
        name, _msg = base.rpc_error(self, old.plan_split, self.ctxt, 'i1',
                                    8192, 'm2', 'p1', True)
        self.assertEqual('PlanError', name)
        # A split in use is never superseded.
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm2', 'p1',
                            supersede=True)
        self.assertEqual([('m', 'running'), ('m2', 'planned')],
                         [(e['main_host'], e['state'])
                          for e in db_api.ledger_list(self.ctxt)])
        self.assertEqual([], self.rpc.computes['near'].stopped)

    def test_source_host_is_never_the_sub_host(self):
        # i9 was just created on 'big': no report lists it yet, and
        # 'big' has the most free memory of m's rack.
        self.flags(group='puma_scheduler',
                   host_racks={'m': 'r1', 'near': 'r1', 'big': 'r1'})
        self.api.report_host(self.ctxt, 'big', base.stats(40000))
        plan = self.api.plan_split(self.ctxt, 'i9', 8192, 'm', 'p1',
                                   source_host='big')
        self.assertEqual('near', plan['sub_host'])
        self.assertEqual([('i9', 'm', 'near')],
                         [(e['instance_uuid'], e['main_host'],
                           e['sub_host'])
                          for e in db_api.ledger_list(self.ctxt)])
        # A scheduler capped below 1.5 knows the source from the reports
        # only, and would have chosen it.
        self.api.release_split(self.ctxt, 'i9')
        old = rpcapi.SchedulerAPI(self.rpc.transport, version_cap='1.4')
        self.assertEqual('big', old.plan_split(
            self.ctxt, 'i9', 8192, 'm', 'p1', source_host='big')['sub_host'])

    def test_scoped_release_needs_version_1_1(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        old = rpcapi.SchedulerAPI(self.rpc.transport, version_cap='1.0')
        self.assertRaises(exception.SchedulerTooOld, old.release_split,
                          self.ctxt, 'i1', main_host='m')
        # Nothing was released instead.
        self.assertEqual(['planned'],
                         [e['state'] for e in db_api.ledger_list(self.ctxt)])
        old.release_split(self.ctxt, 'i1')
        self.assertEqual(['released'],
                         [e['state'] for e in db_api.ledger_list(self.ctxt)])

    def test_upgrade_levels_cap_what_is_sent(self):
        # A scheduler of the previous release still runs: the operator
        # caps the clients in [upgrade_levels], as Nova's own.
        self.flags(group='upgrade_levels', puma_scheduler='1.0',
                   puma_compute='1.0')
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        old = rpcapi.SchedulerAPI(self.rpc.transport)
        self.assertRaises(exception.SchedulerTooOld, old.release_split,
                          self.ctxt, 'i1', main_host='m')
        self.assertFalse(compute_rpcapi.ComputeAPI(
            self.rpc.transport).client.can_send_version('1.1'))
        self.flags(group='upgrade_levels', puma_scheduler=None,
                   puma_compute=None)
        self.assertTrue(rpcapi.SchedulerAPI(
            self.rpc.transport).client.can_send_version('1.4'))
        self.assertTrue(compute_rpcapi.ComputeAPI(
            self.rpc.transport).client.can_send_version('1.1'))

    def _unchanged(self):
        hosts = {h['name']: h for h in db_api.host_list(self.ctxt)}
        self.assertEqual(4608, hosts['m']['free_mb'])
        self.assertNotIn('x', [v['uuid'] for v in db_api.vm_list(self.ctxt)])

    def test_bad_stats_are_refused_by_the_client(self):
        bad = base.stats(100, [base.vm('x')])
        bad['vms'][0]['memory_mb'] = -5
        with mock.patch.object(self.api.client, 'prepare') as prepare:
            e = self.assertRaises(exception.InvalidStats,
                                  self.api.report_host, self.ctxt, 'm', bad)
        prepare.assert_not_called()
        self.assertIn('vms/0/memory_mb', str(e))
        self._unchanged()

    def test_bad_stats_are_refused_by_the_scheduler_and_change_nothing(self):
        """A 1.0 client (or a hostile one) sends the dictionary itself."""
        bad = base.stats(100, [base.vm('x')])
        bad['vms'][0]['memory_mb'] = -5
        cctxt = self.api.client.prepare(version='1.0')
        name, msg = base.rpc_error(self, functools.partial(
            cctxt.call, self.ctxt, 'report_host', host='m', stats=bad))
        self.assertEqual('InvalidStats', name)
        self.assertIn('vms/0/memory_mb', msg)
        self._unchanged()

    def test_bad_object_is_refused_by_the_scheduler_and_changes_nothing(self):
        report = host_report.PumaHostReport.from_stats(
            'm', base.stats(100, [base.vm('x')]))
        wire = rpc.get_serializer().serialize_entity(self.ctxt, report)
        wire['puma_object.data']['free_mb'] = -1
        cctxt = self.api.client.prepare(version='1.4')
        name, msg = base.rpc_error(self, functools.partial(
            cctxt.call, self.ctxt, 'report_host', host='m', report=wire))
        self.assertEqual('InvalidPayload', name)
        self.assertIn('free_mb', msg)
        # Neither report nor stats.
        name, msg = base.rpc_error(self, functools.partial(
            cctxt.call, self.ctxt, 'report_host', host='m'))
        self.assertEqual('InvalidStats', name)
        self._unchanged()

    def test_report_crosses_as_an_object_or_as_stats_below_1_4(self):
        seen = []
        real = manager.SchedulerManager.report_host

        def spy(endpoint, ctxt, host, stats=None, report=None):
            seen.append((type(stats).__name__, type(report).__name__))
            return real(endpoint, ctxt, host, stats=stats, report=report)
        with mock.patch.object(manager.SchedulerManager, 'report_host',
                               new=spy):
            self.api.report_host(self.ctxt, 'm', base.stats(4000))
            capped = rpcapi.SchedulerAPI(self.rpc.transport,
                                         version_cap='1.3')
            capped.report_host(self.ctxt, 'near', base.stats(5000))
        self.assertEqual([('NoneType', 'PumaHostReport'),
                          ('dict', 'NoneType')], seen)
        hosts = {h['name']: h for h in db_api.host_list(self.ctxt)}
        self.assertEqual((4000, 5000), (hosts['m']['free_mb'],
                                        hosts['near']['free_mb']))

    def test_merged_mb_crosses_at_1_6_and_a_1_0_report_below(self):
        """Below 1.6 the report goes in its 1.0 form: no merged_mb."""
        seen = []
        real = manager.SchedulerManager.report_host

        def spy(endpoint, ctxt, host, stats=None, report=None):
            seen.append((report.VERSION,
                         report.obj_attr_is_set('merged_mb')))
            return real(endpoint, ctxt, host, stats=stats, report=report)
        merged = dict(base.stats(4000), merged_mb=300)
        with mock.patch.object(manager.SchedulerManager, 'report_host',
                               new=spy):
            self.api.report_host(self.ctxt, 'm', merged)
            capped = rpcapi.SchedulerAPI(self.rpc.transport,
                                         version_cap='1.5')
            capped.report_host(self.ctxt, 'near', merged)
        self.assertEqual([('1.3', True), ('1.0', False)], seen)
        hosts = {h['name']: h for h in db_api.host_list(self.ctxt)}
        # The 1.0 report of 'near' carried none: the scheduler took 0.
        self.assertEqual((300, 0), (hosts['m']['merged_mb'],
                                    hosts['near']['merged_mb']))

    def test_lending_grace_crosses_at_1_7_and_a_1_1_report_below(self):
        """Under a cap of 1.6 the report goes in its 1.1 form: no grace."""
        seen = []
        real = manager.SchedulerManager.report_host

        def spy(endpoint, ctxt, host, stats=None, report=None):
            seen.append((report.VERSION, report.vms[0].VERSION,
                         report.vms[0].obj_attr_is_set('lending_grace')))
            return real(endpoint, ctxt, host, stats=stats, report=report)
        graced = base.stats(4000, [base.vm('g', free_mb=1024, grace=True)])
        with mock.patch.object(manager.SchedulerManager, 'report_host',
                               new=spy):
            self.api.report_host(self.ctxt, 'm', graced)
            capped = rpcapi.SchedulerAPI(self.rpc.transport,
                                         version_cap='1.6')
            capped.report_host(self.ctxt, 'near', dict(
                graced, vms=[dict(graced['vms'][0], uuid='h')]))
        self.assertEqual([('1.3', '1.1', True), ('1.1', '1.0', False)],
                         seen)
        vms = {v['uuid']: v for v in db_api.vm_list(self.ctxt)}
        # The 1.1 report of 'near' carried none: not in grace.
        self.assertEqual((True, False), (vms['g']['lending_grace'],
                                         vms['h']['lending_grace']))

    def test_cache_saved_mb_crosses_at_1_8_and_a_1_2_report_below(self):
        """Under a cap of 1.7 the report goes in its 1.2 form."""
        seen = []
        real = manager.SchedulerManager.report_host

        def spy(endpoint, ctxt, host, stats=None, report=None):
            seen.append((report.VERSION,
                         report.obj_attr_is_set('cache_saved_mb')))
            return real(endpoint, ctxt, host, stats=stats, report=report)
        saved = dict(base.stats(4000), merged_mb=300, cache_saved_mb=90)
        with mock.patch.object(manager.SchedulerManager, 'report_host',
                               new=spy):
            self.api.report_host(self.ctxt, 'm', saved)
            capped = rpcapi.SchedulerAPI(self.rpc.transport,
                                         version_cap='1.7')
            capped.report_host(self.ctxt, 'near', saved)
        self.assertEqual([('1.3', True), ('1.2', False)], seen)
        hosts = {h['name']: h for h in db_api.host_list(self.ctxt)}
        # The 1.2 report of 'near' carried merged_mb but no cache saving.
        self.assertEqual((90, 0), (hosts['m']['cache_saved_mb'],
                                   hosts['near']['cache_saved_mb']))
        self.assertEqual((300, 300), (hosts['m']['merged_mb'],
                                      hosts['near']['merged_mb']))

    def test_report_without_merged_mb_stores_nothing_merged(self):
        """A dictionary from a compute older than merged_mb (1.0)."""
        cctxt = self.api.client.prepare(version='1.0')
        cctxt.call(self.ctxt, 'report_host', host='m',
                   stats=base.stats(4000))
        hosts = {h['name']: h for h in db_api.host_list(self.ctxt)}
        self.assertEqual(0, hosts['m']['merged_mb'])


class TestPlanningRound(base.TestCase):

    def setUp(self):
        super().setUp()
        # rpc_timeout before the fixture: the scheduler's compute client
        # takes it when it is made.  h3 below never answers.
        self.flags(group='puma_scheduler', planning_interval=3600,
                   miss_rate_threshold=0.1, rpc_timeout=1)
        self.rpc = self.useFixture(base.RPCFixture(['h1', 'h2']))
        self.api = self.rpc.api
        self.manager = self.rpc.service.manager

    def _report(self, lender_idle=True):
        # refaults 524288 pages of 4 KiB = 2048 MiB of missing cache.
        self.api.report_host(self.ctxt, 'h1', base.stats(
            1000, [base.vm('lender', free_mb=3000, lendable=lender_idle),
                   base.vm('other', project='p2', free_mb=3000,
                           lendable=True)],
            address='10.0.0.1'))
        self.api.report_host(self.ctxt, 'h2', base.stats(
            1000, [base.vm('borrower', miss=0.5, refaults=524288)],
            address='10.0.0.2'))

    def test_pair_is_pushed_to_both_hosts_then_revoked(self):
        self._report()
        plan = self.manager.run_planning_round(self.ctxt)
        self.assertEqual(1, len(plan.new))
        pushed = self.rpc.computes['h1'].applied
        self.assertEqual(1, len(pushed))
        pair = pushed[0][0]
        self.assertEqual(
            {'borrower': 'borrower', 'lender': 'lender',
             'lender_address': lending_address.address('lender'),
             'borrower_address': lending_address.address('borrower'),
             'capacity_mb': 2048},
            {k: v for k, v in pair.items() if k != 'key'})
        self.assertEqual(32, len(pair['key']))
        self.assertEqual(pushed, self.rpc.computes['h2'].applied)
        self.assertEqual([['PumaLendingPair']],
                         self.rpc.computes['h1'].kinds)
        # Nothing changed: nothing is pushed again.
        self.manager.run_planning_round(self.ctxt)
        self.assertEqual(1, len(pushed))
        # The lender wakes up: the pair goes, both hosts hear it.
        self._report(lender_idle=False)
        plan = self.manager.run_planning_round(self.ctxt)
        self.assertEqual(1, len(plan.revoke))
        self.assertEqual([], pushed[-1])
        self.assertEqual([], self.rpc.computes['h2'].applied[-1])
        self.assertEqual([], db_api.pair_list(self.ctxt))

    def test_borrower_that_needs_more_keeps_one_pair(self):
        # The borrower misses 2048 MiB: the lender (3000 MiB free) lends
        # 2048.  Then it misses 4096: the same lender has 952 MiB left,
        # but the two have their pair (lending.one_pair_each).  Before the
        # fix the round failed on the duplicate row (DBDuplicateEntry) and
        # stored nothing.
        self._report()
        self.manager.run_planning_round(self.ctxt)
        before = db_api.pair_list(self.ctxt)
        self.api.report_host(self.ctxt, 'h2', base.stats(
            1000, [base.vm('borrower', miss=0.5, refaults=1048576)],
            address='10.0.0.2'))
        plan = self.manager.run_planning_round(self.ctxt)
        self.assertEqual((), plan.new)
        self.assertEqual(before, db_api.pair_list(self.ctxt))
        # The round goes on: a lender that wakes up is still revoked.
        self._report(lender_idle=False)
        self.manager.run_planning_round(self.ctxt)
        self.assertEqual([], db_api.pair_list(self.ctxt))

    def test_hosts_capped_below_1_2_get_dictionaries(self):
        self.flags(group='upgrade_levels', puma_compute='1.1')
        self.manager.compute = compute_rpcapi.ComputeAPI(
            self.rpc.transport, timeout=1)
        self._report()
        self.manager.run_planning_round(self.ctxt)
        self.assertEqual([['dict']], self.rpc.computes['h1'].kinds)
        self.assertEqual(self.rpc.computes['h1'].applied,
                         self.rpc.computes['h2'].applied)
        self.assertEqual(2048,
                         self.rpc.computes['h1'].applied[0][0]['capacity_mb'])

    def test_vms_of_unknown_project_are_never_paired(self):
        self.api.report_host(self.ctxt, 'h1', base.stats(
            1000, [base.vm('l1', project=None, free_mb=3000,
                           lendable=True)]))
        self.api.report_host(self.ctxt, 'h2', base.stats(
            1000, [base.vm('b1', project=None, miss=0.5, refaults=524288)]))
        plan = self.manager.run_planning_round(self.ctxt)
        self.assertEqual((), plan.new)
        self.assertEqual([None, None], [v['project_id'] for v in
                                        db_api.vm_list(self.ctxt)])

    def test_unreachable_host_is_retried(self):
        self._report()
        self.api.report_host(self.ctxt, 'h3', base.stats(
            1000, [base.vm('b3', miss=0.5, refaults=262144)]))
        self.manager.run_planning_round(self.ctxt)
        self.assertNotIn('h3', self.manager._pushed)
        self.assertIn('h1', self.manager._pushed)


class SplitHostsCase(base.TestCase):
    """8 GiB servers on 'src'; main hosts m, m2; sub hosts near, far."""

    SERVERS = ('i1', 'i2')

    def setUp(self):
        super().setUp()
        self.flags(group='puma_scheduler', planning_interval=3600,
                   plan_ttl=600, reserve_mb=512,
                   host_racks={'m': 'r1', 'near': 'r1'})
        self.rpc = self.useFixture(base.RPCFixture(['m', 'near', 'far']))
        self.api = self.rpc.api
        self.api.report_host(self.ctxt, 'src', base.stats(
            1000, [base.vm(u, memory_mb=8192) for u in self.SERVERS]))
        self.api.report_host(self.ctxt, 'm', base.stats(4608))
        self.api.report_host(self.ctxt, 'm2', base.stats(4608))
        self.api.report_host(self.ctxt, 'near', base.stats(6000))
        self.api.report_host(self.ctxt, 'far', base.stats(30000))

    def _states(self):
        return [(e['instance_uuid'], e['state'])
                for e in db_api.ledger_list(self.ctxt)]


class TestStalePlans(SplitHostsCase):
    """Plans whose migration never started, and their release."""

    def test_plan_whose_migration_never_started_expires(self):
        # puma-api planned, then Nova failed the migration before the
        # destination saw it (NoValidHost, a conductor precheck): nothing
        # but the scheduler's periodic task can give the memory back.
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.assertEqual(4096, db_api.ledger_commitments(self.ctxt)['near'])
        base.age_ledger(601)
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'released')], self._states())
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'm'))
        self.assertEqual([], self.api.get_ledger(self.ctxt, 'near'))
        self.assertEqual({}, db_api.ledger_commitments(self.ctxt))
        self.assertEqual(['stopped'], [m['state'] for m in
                                       db_api.memory_server_list(self.ctxt)])
        # The destination may have started the memory server: stopped.
        self.assertEqual(['i1'], self.rpc.computes['near'].stopped)

    def test_young_plans_and_splits_in_use_are_kept(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.api.plan_split(self.ctxt, 'i2', 8192, 'm2', 'p1')
        base.age_ledger(601, instance_uuid='i1')
        base.age_ledger(599, instance_uuid='i2')
        self.assertEqual([], self.rpc.service.manager.expire_plans(
            self.ctxt))
        self.assertEqual([('i1', 'running'), ('i2', 'planned')],
                         self._states())

    def test_failed_split_left_unreleased_expires(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'failed')
        base.age_ledger(601)
        released = self.rpc.service.manager.expire_plans(self.ctxt)
        self.assertEqual([('i1', 'm', 'failed')],
                         [(e['instance_uuid'], e['main_host'], e['state'])
                          for e in released])
        self.assertEqual([('i1', 'released')], self._states())

    def test_migration_that_starts_meanwhile_is_kept(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        base.age_ledger(601)
        manager = self.rpc.service.manager
        (stale,) = db_api.ledger_stale(self.ctxt, db_api.since(600))
        # The source starts the migration between the read and the
        # release.
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.assertEqual(0, manager._release_stale(self.ctxt, stale))
        self.assertEqual([('i1', 'running')], self._states())
        self.assertEqual([], self.rpc.computes['near'].stopped)

    def test_release_entry(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.plan_split(self.ctxt, 'i2', 8192, 'm2', 'p1')
        self.api.split_state(self.ctxt, 'i2', 'running')
        first, second = db_api.ledger_list(self.ctxt)
        entry = self.api.release_entry(self.ctxt, first['id'])
        self.assertEqual({'id': first['id'], 'instance_uuid': 'i1',
                          'main_host': 'm', 'sub_host': 'near', 'mb': 4096,
                          'state': 'released'}, entry)
        self.assertEqual(['i1'], self.rpc.computes['near'].stopped)
        # Idempotent.
        self.assertEqual('released', self.api.release_entry(
            self.ctxt, first['id'])['state'])
        name, msg = base.rpc_error(self, self.api.release_entry, self.ctxt,
                                   second['id'])
        self.assertEqual('InvalidTransition', name)
        self.assertIn('is running: the split is in use', msg)
        name, _msg = base.rpc_error(self, self.api.release_entry, self.ctxt,
                                    999)
        self.assertEqual('LedgerNotFound', name)
        self.assertEqual([('i1', 'released'), ('i2', 'running')],
                         self._states())
        old = rpcapi.SchedulerAPI(self.rpc.transport, version_cap='1.1')
        self.assertRaises(exception.SchedulerTooOld, old.release_entry,
                          self.ctxt, second['id'])


class TestFailedMigrations(SplitHostsCase):
    """Plans whose live migration Nova ended in failure are released.

    Nova's migration records (os-migrations, NovaClient.live_migrations)
    are read at each periodic run, long before plan_ttl (600 s here).
    """

    def _plan(self, uuid, main='m'):
        self.api.plan_split(self.ctxt, uuid, 8192, main, 'p1')
        return [e for e in db_api.ledger_list(self.ctxt, instance_uuid=uuid)
                if e['state'] == models.PLANNED][-1]

    @staticmethod
    def _at(entry, seconds):
        return entry['created_at'] + datetime.timedelta(seconds=seconds)

    def test_plan_of_a_migration_nova_failed_is_released_at_once(self):
        # puma-api planned, then asked Nova, whose conductor created the
        # migration and failed it (no valid host, a precheck).
        for uuid, status in (('i1', 'error'), ('i2', 'cancelled')):
            entry = self._plan(uuid, main='m' if uuid == 'i1' else 'm2')
            self.nova.add(uuid, status, self._at(entry, 1),
                          self._at(entry, 2))
        self.assertEqual({'near': 4096, 'far': 4096},
                         self.placement.lent())
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'released'), ('i2', 'released')],
                         self._states())
        self.assertEqual({}, db_api.ledger_commitments(self.ctxt))
        self.assertEqual({}, self.placement.lent())
        self.assertEqual(['stopped', 'stopped'],
                         [m['state'] for m in
                          db_api.memory_server_list(self.ctxt)])
        # The destination may have started the memory server: stopped.
        self.assertEqual(['i1'], self.rpc.computes['near'].stopped)
        self.assertEqual(['i2'], self.rpc.computes['far'].stopped)

    def test_plan_of_a_destination_nova_gave_up_is_released(self):
        # The destination planned during its checks, after the conductor
        # created the migration; binding the ports on it failed.
        entry = self._plan('i1')
        self.nova.add('i1', 'error', self._at(entry, -3),
                      self._at(entry, 1))
        released = self.rpc.service.manager.release_failed_plans(self.ctxt)
        self.assertEqual([(entry['id'], 'i1', 'm', 'planned')],
                         [(e['id'], e['instance_uuid'], e['main_host'],
                           e['state']) for e in released])
        self.assertEqual([('i1', 'released')], self._states())
        self.assertEqual(['i1'], self.rpc.computes['near'].stopped)

    def test_failure_in_the_second_of_the_plan_counts(self):
        # Nova's database keeps whole seconds.
        entry = self._plan('i1')
        moment = entry['created_at'].replace(microsecond=0)
        self.nova.add('i1', 'error', moment, moment)
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'released')], self._states())

    def test_failed_split_left_unreleased_is_released(self):
        entry = self._plan('i1')
        self.api.split_state(self.ctxt, 'i1', 'failed')
        self.nova.add('i1', 'failed', self._at(entry, 1),
                      self._at(entry, 30))
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'released')], self._states())
        self.assertEqual(['i1'], self.rpc.computes['near'].stopped)

    def test_migrations_in_progress_or_completed_keep_the_plan(self):
        for status in ('accepted', 'queued', 'preparing', 'running',
                       'running (post-copy)', 'completed'):
            self.nova.records.clear()
            entry = db_api.ledger_list(self.ctxt, instance_uuid='i1')
            entry = entry[0] if entry else self._plan('i1')
            # An earlier attempt failed after the plan; this one goes on
            # (or went through).
            self.nova.add('i1', 'error', self._at(entry, 1),
                          self._at(entry, 2))
            self.nova.add('i1', status, self._at(entry, 3),
                          self._at(entry, 4) if status != 'accepted'
                          else None)
            self.assertEqual([], self.rpc.service.manager
                             .release_failed_plans(self.ctxt), status)
            self.assertEqual([('i1', 'planned')], self._states(), status)
        self.assertEqual([], self.rpc.computes['near'].stopped)

    def test_running_split_is_never_read_nor_released(self):
        entry = self._plan('i1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.nova.add('i1', 'error', self._at(entry, 1), self._at(entry, 2))
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'running')], self._states())
        self.assertEqual([], self.nova.reads)

    def test_migration_that_ended_before_the_plan_is_ignored(self):
        # A previous attempt failed; puma-api planned again and has not
        # asked Nova yet.
        entry = self._plan('i1')
        self.nova.add('i1', 'error', self._at(entry, -60),
                      self._at(entry, -5))
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'planned')], self._states())
        self.assertEqual(['i1'], self.nova.reads)
        self.assertEqual([], self.rpc.computes['near'].stopped)

    def test_unreachable_nova_keeps_plans_and_plan_ttl_applies(self):
        log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        entry = self._plan('i1')
        self._plan('i2', main='m2')
        self.nova.add('i1', 'error', self._at(entry, 1), self._at(entry, 2))
        self.nova.error = exception.NovaError('Nova is away')
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'planned'), ('i2', 'planned')],
                         self._states())
        # One read per run: the run stops at the first failure.
        self.assertEqual(['i1', 'i1'], self.nova.reads)
        # Warned once, not at every run.
        self.assertEqual(1, log.output.count('Nova is away'), log.output)
        # The expiry still releases them.
        base.age_ledger(601)
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'released'), ('i2', 'released')],
                         self._states())
        # Nova answers again: said once.
        self.nova.error = None
        self._plan('i1')
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertIn('Nova answers again', log.output)

    def test_turned_off_reads_nothing(self):
        # The service's own choice of client (base.TestCase replaces it).
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.scheduler.service.nova_client', NOVA_CLIENT))
        self.assertIsInstance(service.nova_client(), nova.SDKNovaClient)
        self.flags(group='puma_scheduler', release_failed_migrations=False)
        svc = service.SchedulerService(self.rpc.transport)
        self.assertIsNone(svc.manager.nova)
        entry = self._plan('i1')
        self.nova.add('i1', 'error', self._at(entry, 1), self._at(entry, 2))
        svc.run_periodic_tasks(self.ctxt)
        self.assertEqual([('i1', 'planned')], self._states())
        self.assertEqual([], self.nova.reads)


class TestPlacementLending(SplitHostsCase):
    """What a split lends is in placement from its plan to its release."""

    SERVERS = ('i1',)

    def test_plan_lends_once(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.assertEqual({'near': 4096}, self.placement.lent())
        # The destination asks again for the plan puma-api made.
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.assertEqual([('lend', 'near', 4096)], self.placement.calls)

    def test_fits_whole_lends_nothing(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'far', 'p1')
        self.assertEqual([], self.placement.calls)

    def test_sub_host_without_room_fails_the_plan(self):
        self.placement.room['near'] = 4095
        name, msg = base.rpc_error(self, self.api.plan_split, self.ctxt,
                                   'i1', 8192, 'm', 'p1')
        self.assertEqual('PlanError', name)
        self.assertIn('cannot reserve 4096 MiB of sub host near in '
                      'placement for the split of i1', msg)
        self.assertIn('host near cannot lend 4096 MiB', msg)
        # Nothing left behind.
        self.assertEqual([], db_api.ledger_list(self.ctxt))
        self.assertEqual([], db_api.memory_server_list(self.ctxt))
        self.assertEqual({}, db_api.ledger_commitments(self.ctxt))
        self.assertEqual({}, self.placement.lent())

    def test_ledger_write_failure_gives_back(self):
        with mock.patch.object(db_api, 'ledger_create',
                               side_effect=RuntimeError('db away')):
            name, _msg = base.rpc_error(self, self.api.plan_split,
                                        self.ctxt, 'i1', 8192, 'm', 'p1')
        self.assertEqual('RuntimeError', name)
        self.assertEqual({}, self.placement.lent())
        self.assertEqual([], db_api.ledger_list(self.ctxt))

    def test_release_gives_back_once(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.api.split_state(self.ctxt, 'i1', 'done')
        self.assertEqual({'near': 4096}, self.placement.lent())
        self.api.release_split(self.ctxt, 'i1', main_host='m')
        self.assertEqual({}, self.placement.lent())
        self.api.release_split(self.ctxt, 'i1', main_host='m')
        self.assertEqual(1, self.placement.calls.count(
            ('give_back', 'near', 4096)))

    def test_failed_split_gives_back_when_it_fails(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'failed')
        # A failed entry holds nothing, in the ledger and in placement.
        self.assertEqual({}, self.placement.lent())
        self.api.release_split(self.ctxt, 'i1', main_host='m')
        self.assertEqual(1, self.placement.calls.count(
            ('give_back', 'near', 4096)))

    def test_done_second_move_gives_back_the_first_split(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.api.split_state(self.ctxt, 'i1', 'done')
        self.api.report_host(self.ctxt, 'src', base.stats(9000))
        second = self.api.plan_split(self.ctxt, 'i1', 8192, 'm2', 'p1')
        self.assertEqual('far', second['sub_host'])
        self.assertEqual({'near': 4096, 'far': 4096},
                         self.placement.lent())
        self.api.split_state(self.ctxt, 'i1', 'running')
        self.assertEqual({'near': 4096, 'far': 4096},
                         self.placement.lent())
        self.api.split_state(self.ctxt, 'i1', 'done')
        self.assertEqual({'far': 4096}, self.placement.lent())

    def test_expired_plan_gives_back(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.assertEqual({'near': 4096}, self.placement.lent())
        base.age_ledger(601)
        self.rpc.service.run_periodic_tasks(self.ctxt)
        self.assertEqual({}, self.placement.lent())

    def test_release_entry_gives_back(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        entry, = db_api.ledger_list(self.ctxt)
        self.assertEqual({'near': 4096}, self.placement.lent())
        self.api.release_entry(self.ctxt, entry['id'])
        self.assertEqual({}, self.placement.lent())

    def test_superseded_plan_gives_back(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm2', 'p1',
                            supersede=True)
        self.assertEqual([('lend', 'near', 4096),
                          ('give_back', 'near', 4096),
                          ('lend', 'far', 4096)], self.placement.calls)
        self.assertEqual({'far': 4096}, self.placement.lent())

    def test_give_back_failure_still_releases(self):
        self.api.plan_split(self.ctxt, 'i1', 8192, 'm', 'p1')
        with mock.patch.object(self.placement, 'give_back',
                               side_effect=RuntimeError('away')):
            self.api.release_split(self.ctxt, 'i1')
        self.assertEqual([('i1', 'released')], self._states())
        self.assertEqual({'near': 4096}, self.placement.lent())
