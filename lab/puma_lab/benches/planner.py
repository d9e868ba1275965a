# SPDX-License-Identifier: Apache-2.0
"""The planning core at datacenter scale (no guests: a pure function).

A seeded synthetic cluster (default 10k hosts in 250 racks, 200k VMs in
2000 projects; 40% idle with free memory, 30% missing cache) goes through
two lending rounds: a fresh one, then one after 5% of the lenders woke up
(revocations, kept pairs, re-matching); then 100 split-migration plans.
``round_s`` is the slower lending round.  ``locality_x`` compares the share
of lent MiB that stays on the borrower's host or rack with the share a
random pairing of the same lenders and borrowers gets in the same run.
"""

import argparse
import random
import sys
import time

from puma_nova.planning import lending
from puma_nova.planning import model
from puma_nova.planning import split


def synthetic(rnd, hosts, vms, projects, racks):
    hs = [model.Host('h%d' % i, 'r%d' % (i % racks), 262144,
                     rnd.randrange(4096, 65536)) for i in range(hosts)]
    vs = []
    for i in range(vms):
        r = rnd.random()
        idle = r < 0.4
        vs.append(model.VM('v%d' % i, 'h%d' % rnd.randrange(hosts),
                           'p%d' % rnd.randrange(projects),
                           rnd.choice([2048, 4096, 8192, 16384]), idle=idle,
                           free_mb=rnd.randrange(512, 4096) if idle else 0,
                           cache_demand_mb=rnd.randrange(256, 4096)
                           if 0.4 <= r < 0.7 else 0))
    return model.Cluster.build(hs, vs)


def local_share(cluster, pairs):
    total = local = 0
    for p in pairs:
        a, b = cluster.vms[p.lender], cluster.vms[p.borrower]
        total += p.mb
        if a.host == b.host or \
                cluster.hosts[a.host].rack == cluster.hosts[b.host].rack:
            local += p.mb
    return local / total if total else 0.0


def random_pairs(rnd, cluster, pairs):
    """The same lenders and borrowers per project, paired at random."""
    by_project = {}
    for p in pairs:
        lenders, borrowers = by_project.setdefault(
            cluster.vms[p.lender].project, ([], []))
        lenders.append(p.lender)
        borrowers.append((p.borrower, p.mb))
    out = []
    for lenders, borrowers in by_project.values():
        rnd.shuffle(lenders)
        out.extend(model.Pair(lender, b, mb)
                   for lender, (b, mb) in zip(lenders, borrowers))
    return out


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench planner')
    ap.add_argument('--hosts', type=int, default=10000)
    ap.add_argument('--vms', type=int, default=200000)
    ap.add_argument('--projects', type=int, default=2000)
    ap.add_argument('--racks', type=int, default=250)
    ap.add_argument('--seed', type=int, default=1)
    args = ap.parse_args(argv)
    rnd = random.Random(args.seed)
    cluster = synthetic(rnd, args.hosts, args.vms, args.projects, args.racks)

    t0 = time.perf_counter()
    first = lending.plan_pairs(cluster)
    round1 = time.perf_counter() - t0
    print('round 1: %d pairs in %.3f s' % (len(first.pairs), round1),
          file=sys.stderr)

    lenders = sorted({p.lender for p in first.pairs})
    woke = set(rnd.sample(lenders, len(lenders) // 20))
    vms = {u: (model.VM(v.uuid, v.host, v.project, v.ram_mb, idle=False)
               if u in woke else v) for u, v in cluster.vms.items()}
    second_cluster = model.Cluster(cluster.hosts, vms, first.pairs)
    t0 = time.perf_counter()
    second = lending.plan_pairs(second_cluster)
    round2 = time.perf_counter() - t0
    print('round 2: %d kept, %d new, %d revoked in %.3f s'
          % (len(second.keep), len(second.new), len(second.revoke), round2),
          file=sys.stderr)

    vm_ids = rnd.sample(sorted(cluster.vms), 100)
    t0 = time.perf_counter()
    planned = 0
    for u in vm_ids:
        main = 'h%d' % rnd.randrange(args.hosts)
        try:
            if split.plan_split(cluster, u, main) is not None:
                planned += 1
        except split.PlanError:
            pass
    split_s = time.perf_counter() - t0

    planner_local = local_share(cluster, first.pairs)
    random_local = local_share(cluster, random_pairs(rnd, cluster,
                                                     first.pairs))
    return {'hosts': args.hosts, 'vms': args.vms,
            'round_s': round(max(round1, round2), 3),
            'round1_s': round(round1, 3), 'round2_s': round(round2, 3),
            'pairs': len(first.pairs), 'revoked': len(second.revoke),
            'kept': len(second.keep), 'rematched': len(second.new),
            'split_plans': planned, 'split_100_s': round(split_s, 3),
            'local_share': round(planner_local, 3),
            'random_local_share': round(random_local, 3),
            'locality_x': round(planner_local / random_local, 2)
            if random_local else None}
