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
"""Planning scenarios (scenarios/*.json) and planner invariants."""

import json
import os
import random
import unittest

from puma_nova.planning import lending
from puma_nova.planning import maintenance
from puma_nova.planning import model
from puma_nova.planning import split
from puma_nova.tests.unit import lending_reference

SCENARIOS = os.path.join(os.path.dirname(__file__), 'scenarios')


def load(name):
    with open(os.path.join(SCENARIOS, name)) as f:
        text = f.read()
    return model.Cluster.from_json(text), json.loads(text)


def triples(pairs):
    return [[p.lender, p.borrower, p.mb] for p in pairs]


def random_cluster(seed, hosts=40, vms=600):
    rnd = random.Random(seed)
    hs = [model.Host('h%d' % i, 'r%d' % (i % 5), 65536,
                     rnd.randrange(0, 32768)) for i in range(hosts)]
    vs = []
    for i in range(vms):
        idle = rnd.random() < 0.4
        vs.append(model.VM('v%d' % i, 'h%d' % rnd.randrange(hosts),
                           'p%d' % rnd.randrange(6), 4096, idle=idle,
                           free_mb=rnd.randrange(0, 3072) if idle else 0,
                           cache_demand_mb=0 if idle else
                           rnd.choice([0, 512, 2048])))
    return model.Cluster.build(hs, vs)


class TestLendingScenarios(unittest.TestCase):

    def test_closest_borrowers_first_projects_never_mixed(self):
        cluster, doc = load('locality.json')
        plan = lending.plan_pairs(cluster)
        self.assertEqual(doc['expect_new'], triples(plan.new))
        self.assertEqual((), plan.revoke)

    def test_woken_lender_is_revoked(self):
        cluster, doc = load('lender_wakes.json')
        plan = lending.plan_pairs(cluster)
        self.assertEqual(doc['expect_keep'], triples(plan.keep))
        self.assertEqual(doc['expect_revoke'], triples(plan.revoke))
        self.assertEqual(doc['expect_new'], triples(plan.new))


class TestLendingGrace(unittest.TestCase):
    """A lender in grace keeps its pairs and gets no new one."""

    def cluster(self, l1, pairs=()):
        hosts = [model.Host('h1', 'r1', 65536, 32768)]
        vms = [l1,
               model.VM('l2', 'h1', 'p', 4096, lending_grace=True),
               model.VM('b1', 'h1', 'p', 4096, cache_demand_mb=2048),
               model.VM('b2', 'h1', 'p', 4096, cache_demand_mb=1024)]
        return model.Cluster.build(hosts, vms, pairs)

    def test_kept_through_one_report_in_grace(self):
        pair = model.Pair('l1', 'b1', 2048)
        plan = lending.plan_pairs(self.cluster(
            model.VM('l1', 'h1', 'p', 4096, lending_grace=True), [pair]))
        self.assertEqual((pair,), plan.keep)
        # Neither l1 (in grace, 2048 MiB not lent) nor l2 lends to b2, and
        # neither borrows.
        self.assertEqual((), plan.new)
        self.assertEqual((), plan.revoke)

    def test_revoked_when_busy(self):
        pair = model.Pair('l1', 'b1', 2048)
        plan = lending.plan_pairs(self.cluster(
            model.VM('l1', 'h1', 'p', 4096), [pair]))
        self.assertEqual((pair,), plan.revoke)
        self.assertEqual((), plan.new)

    def test_idle_again_lends_anew(self):
        plan = lending.plan_pairs(self.cluster(
            model.VM('l1', 'h1', 'p', 4096, idle=True, free_mb=4096)))
        self.assertEqual([['l1', 'b1', 2048], ['l1', 'b2', 1024]],
                         triples(plan.new))


class TestLendingInvariants(unittest.TestCase):

    def test_capacities_and_projects_hold_on_random_clusters(self):
        for seed in range(20):
            cluster = random_cluster(seed)
            plan = lending.plan_pairs(cluster, min_lend_mb=256)
            given, got = {}, {}
            for p in plan.pairs:
                lender = cluster.vms[p.lender]
                borrower = cluster.vms[p.borrower]
                self.assertTrue(lender.idle)
                self.assertFalse(borrower.idle)
                self.assertEqual(lender.project, borrower.project)
                self.assertGreater(p.mb, 0)
                given[p.lender] = given.get(p.lender, 0) + p.mb
                got[p.borrower] = got.get(p.borrower, 0) + p.mb
            for u, mb in given.items():
                self.assertLessEqual(mb, cluster.vms[u].free_mb)
            for u, mb in got.items():
                self.assertLessEqual(mb, cluster.vms[u].cache_demand_mb)

    def test_second_round_keeps_everything_when_nothing_changed(self):
        cluster = random_cluster(7)
        first = lending.plan_pairs(cluster)
        again = lending.plan_pairs(model.Cluster(cluster.hosts, cluster.vms,
                                                 first.pairs))
        self.assertEqual(set(first.pairs), set(again.keep))
        self.assertEqual((), again.revoke)

    def test_borrower_cap(self):
        cluster, _doc = load('locality.json')
        plan = lending.plan_pairs(cluster, max_per_borrower_mb=1000)
        self.assertTrue(all(p.mb <= 1000 for p in plan.new))


def tied_cluster(seed, hosts=30, vms=900, projects=4, racks=3):
    """Dense, with many equal amounts: ties decide the order of pairs."""
    rnd = random.Random(seed)
    hs = [model.Host('h%d' % i, 'r%d' % (i % racks), 65536, 32768)
          for i in range(hosts)]
    vs = []
    for i in range(vms):
        r = rnd.random()
        idle = r < 0.4
        vs.append(model.VM('v%d' % i, 'h%d' % rnd.randrange(hosts),
                           'p%d' % rnd.randrange(projects), 4096, idle=idle,
                           free_mb=rnd.choice([0, 128, 256, 512, 1024])
                           if idle else 0,
                           cache_demand_mb=rnd.choice([0, 256, 512, 1536])
                           if not idle and r < 0.8 else 0))
    return model.Cluster.build(hs, vs)


def next_round(rnd, cluster, pairs):
    """Some lenders wake, some borrowers go idle, some VMs are gone."""
    vms = {}
    for u, v in cluster.vms.items():
        r = rnd.random()
        if r < 0.03:
            continue
        if r < 0.08:
            v = model.VM(v.uuid, v.host, v.project, v.ram_mb,
                         idle=not v.idle, free_mb=512 if not v.idle else 0,
                         cache_demand_mb=0 if not v.idle else 1024)
        elif r < 0.12 and v.idle:
            # Its CPU's first report above the limit: in grace.
            v = model.VM(v.uuid, v.host, v.project, v.ram_mb,
                         lending_grace=True)
        vms[u] = v
    return model.Cluster(cluster.hosts, vms, tuple(pairs))


class TestOnePairEach(unittest.TestCase):

    def test_borrower_is_not_paired_twice_with_its_lender(self):
        c = model.Cluster.build(
            [model.Host('h1', 'r1', 65536, 8192),
             model.Host('h2', 'r1', 65536, 8192)],
            [model.VM('l', 'h1', 'p', 4096, idle=True, free_mb=3000),
             model.VM('b', 'h2', 'p', 4096, cache_demand_mb=4096)],
            [model.Pair('l', 'b', 2048)])
        plan = lending.plan_pairs(c)
        self.assertEqual((model.Pair('l', 'b', 2048),), plan.keep)
        # 952 MiB left at l, 2048 still missed by b: no second pair.
        self.assertEqual((), plan.new)


class TestLendingMatchesReference(unittest.TestCase):
    """The indexed planner gives the straightforward one's plan exactly."""

    def assertSamePlan(self, cluster, **kwargs):
        want = lending_reference.plan_pairs(cluster, **kwargs)
        got = lending.plan_pairs(cluster, **kwargs)
        for part in ('keep', 'new', 'revoke'):
            self.assertEqual(triples(getattr(want, part)),
                             triples(getattr(got, part)), part)
        return got

    def test_fresh_and_second_rounds(self):
        options = [{}, {'min_lend_mb': 0}, {'min_lend_mb': 512},
                   {'max_per_borrower_mb': 300},
                   {'min_lend_mb': 128, 'max_per_borrower_mb': 1000}]
        for seed in range(12):
            rnd = random.Random(seed)
            for cluster in (random_cluster(seed), tied_cluster(seed)):
                for kwargs in options:
                    first = self.assertSamePlan(cluster, **kwargs)
                    self.assertSamePlan(
                        next_round(rnd, cluster, first.pairs), **kwargs)


class TestSplit(unittest.TestCase):

    def cluster(self, main_free=8704):
        return model.Cluster.build(
            [model.Host('src', 'r1', 65536, 1024),
             model.Host('main', 'r1', 65536, main_free),
             model.Host('same-rack', 'r1', 65536, 9000),
             model.Host('big-far', 'r2', 65536, 60000)],
            [model.VM('big', 'src', 'p', 16384)])

    def test_same_rack_sub_host(self):
        plan = split.plan_split(self.cluster(), 'big', 'main')
        self.assertEqual(split.SplitPlan('big', 'main', 'same-rack', 8192,
                                         8192), plan)

    def test_other_rack_when_rack_is_full(self):
        plan = split.plan_split(self.cluster(main_free=6000), 'big', 'main')
        self.assertEqual('big-far', plan.sub_host)
        self.assertEqual(5488, plan.resident_limit_mb)

    def test_fits_whole_needs_no_split(self):
        self.assertIsNone(split.plan_split(self.cluster(main_free=20000),
                                           'big', 'main'))

    def test_refusals_name_the_reason(self):
        c = self.cluster(main_free=2000)
        self.assertRaisesRegex(split.PlanError, 'can keep only 1488 MiB',
                               split.plan_split, c, 'big', 'main')
        self.assertRaisesRegex(split.PlanError, 'unknown server nope',
                               split.plan_split, c, 'nope', 'main')
        self.assertRaisesRegex(split.PlanError, 'unknown host h9',
                               split.plan_split, c, 'big', 'h9')
        self.assertRaisesRegex(split.PlanError, 'no host can hold',
                               split.plan_split, self.cluster(), 'big',
                               'main', exclude=('same-rack', 'big-far'))


class TestEvacuation(unittest.TestCase):
    """planning.maintenance: empty a host, whole where a VM fits."""

    def cluster(self, c_free=10240):
        return model.Cluster.build(
            [model.Host('a', 'r1', 65536, 0),
             model.Host('b', 'r1', 65536, 8192),
             model.Host('c', 'r1', 65536, c_free),
             model.Host('d', 'r1', 65536, 3000)],
            [model.VM('big', 'a', 'p', 12288),
             model.VM('small', 'a', 'p', 2048),
             model.VM('elsewhere', 'b', 'p', 4096)])

    def test_whole_where_it_fits_split_where_none_does(self):
        moves = maintenance.plan_evacuation(self.cluster(), 'a')
        # Largest first: no host holds 12288 MiB above its 512 MiB
        # reserve, so it is split to the host with the most free memory
        # (c keeps 9728 MiB), its remote 2560 MiB on b (b's 8192 MiB are
        # more than d's 3000).  Then the small VM goes whole where it fits
        # best: d (3000 - 512 >= 2048), not b (5632 left).
        self.assertEqual(
            [maintenance.Move('big', 'c', 'b', 9728, 2560),
             maintenance.Move('small', 'd')], moves)
        self.assertTrue(moves[0].split)
        self.assertFalse(moves[1].split)

    def test_each_move_takes_its_memory(self):
        # With c smaller, the split keeps less on c and puts more on b,
        # and the small VM no longer fits on d: b, after the remote part.
        c = model.Cluster.build(
            [model.Host('a', 'r1', 65536, 0),
             model.Host('b', 'r1', 65536, 12000),
             model.Host('c', 'r1', 65536, 9000),
             model.Host('d', 'r1', 65536, 2000)],
            [model.VM('big', 'a', 'p', 12288),
             model.VM('small', 'a', 'p', 2048)])
        moves = maintenance.plan_evacuation(c, 'a')
        self.assertEqual(maintenance.Move('big', 'b', 'c', 11488, 800),
                         moves[0])
        self.assertEqual(maintenance.Move('small', 'c'), moves[1])

    def test_vm_that_may_not_be_split_is_refused(self):
        self.assertRaisesRegex(
            split.PlanError, 'no host can hold server big .* does not allow',
            maintenance.plan_evacuation, self.cluster(), 'a',
            splittable=lambda vm: vm.uuid != 'big')

    def test_nowhere_says_why(self):
        c = model.Cluster.build(
            [model.Host('a', 'r1', 65536, 0),
             model.Host('b', 'r1', 65536, 2000)],
            [model.VM('big', 'a', 'p', 12288)])
        self.assertRaisesRegex(
            split.PlanError, 'server big .* can go nowhere.*can keep only',
            maintenance.plan_evacuation, c, 'a')

    def test_excluded_hosts_take_nothing(self):
        moves = maintenance.plan_evacuation(self.cluster(), 'a',
                                            exclude=('d',))
        self.assertEqual(maintenance.Move('small', 'b'), moves[1])
        self.assertRaisesRegex(split.PlanError, 'unknown host z',
                               maintenance.plan_evacuation, self.cluster(),
                               'z')
