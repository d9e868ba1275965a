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
"""Lending pairs: which idle VM lends free memory to which active VM.

Description:
    Idle VMs (the guest module sees no activity) lend the memory they do not
    use as a remote page cache to active VMs of the same project that are
    missing cache.  A pair is revoked as soon as its lender is no longer
    idle (one report in grace keeps it: a new pair's own work can
    take CPU), or either VM is gone; kept pairs keep their capacity.  New pairs
    are matched greedily, closest first: same host (no network hop), then
    same rack, then anywhere; inside a locality bucket, the borrowers that
    miss the most cache are served first, from the lenders with the most
    to give.

Requirements:
    Per-VM statistics from the compute nodes (idle, free_mb,
    cache_demand_mb) and each VM's project and host.

Limitations:
    Greedy, not an optimal assignment; RTT is approximated by locality
    (host, rack); one round costs O(n log n) in the number of VMs.

Cost:
    Projects never share a pair, so a round walks the candidates once,
    grouped by project, and matches each project at the three levels on
    its own; a host or rack bucket is only built where a borrower has a
    lender of its project on the same host or rack.  The pairs come out
    in the order of the plain algorithm (level by level, buckets in the
    order of their first borrower), which the tests keep as a reference.
"""

import dataclasses
import operator

from puma_nova.planning import model

# Locality levels, closest first: what two VMs must share to be "close".
LEVELS = ('host', 'rack', 'any')

# The fields of a candidate record (see _Project), and the field each
# level's buckets share (None: the whole project is one bucket).
UUID, HOST, RACK, ORDER = range(4)
SHARED = {'host': HOST, 'rack': RACK, 'any': None}


@dataclasses.dataclass(frozen=True)
class Plan:
    keep: tuple
    new: tuple
    revoke: tuple

    @property
    def pairs(self):
        return self.keep + self.new


def _still_valid(vms, pair):
    lender = vms.get(pair.lender)
    borrower = vms.get(pair.borrower)
    return (lender is not None and borrower is not None and
            (lender.idle or lender.lending_grace) and
            not borrower.idle and lender.project == borrower.project)


def _most_first(uuids, amount):
    """UUIDS by AMOUNT, largest first, ties by uuid (stable sorts)."""
    return sorted(sorted(uuids), key=amount.__getitem__, reverse=True)


def _match(bucket_lenders, bucket_borrowers, left, need, cap):
    """Greedy match inside one locality bucket; updates LEFT and NEED."""
    lenders = _most_first(bucket_lenders, left)
    borrowers = _most_first(bucket_borrowers, need)
    pairs = []
    li = 0
    for b in borrowers:
        want = min(need[b], cap) if cap else need[b]
        while want > 0 and li < len(lenders):
            lender = lenders[li]
            give = min(want, left[lender])
            if give > 0:
                pairs.append(model.Pair(lender, b, give))
                left[lender] -= give
                need[b] -= give
                want -= give
            if left[lender] <= 0:
                li += 1
    return pairs


class _Project:
    """The candidates of one project, in the cluster's VM order.

    Plain tuples (UUID, HOST, RACK) for lenders, (UUID, HOST, RACK, ORDER)
    for borrowers: ORDER, the borrower's rank among the cluster's VMs,
    places the project's buckets among all others in the plan.
    """

    __slots__ = ('lenders', 'borrowers')

    def __init__(self):
        self.lenders = []
        self.borrowers = []


def _candidates(cluster, keep, min_lend_mb):
    """What each VM can lend or is missing, and the projects' candidates.

    :returns: (left, need, projects): MiB each idle VM has left to lend
        and each active VM still misses, once the KEEP pairs are counted;
        and per project the lenders with at least MIN_LEND_MB left and the
        borrowers missing some.
    """
    lent, got = {}, {}
    for pair in keep:
        lent[pair.lender] = lent.get(pair.lender, 0) + pair.mb
        got[pair.borrower] = got.get(pair.borrower, 0) + pair.mb
    rack_of = {h.name: h.rack for h in cluster.hosts.values()}
    left, need, projects = {}, {}, {}
    for order, vm in enumerate(cluster.vms.values()):
        u = vm.uuid
        if vm.lending_grace:
            # Keeps its pairs (_still_valid), neither lends nor borrows
            # anew.
            continue
        if vm.idle:
            mb = left[u] = vm.free_mb - lent.get(u, 0)
            if mb < min_lend_mb:
                continue
        elif vm.cache_demand_mb > 0:
            mb = need[u] = vm.cache_demand_mb - got.get(u, 0)
            if mb <= 0:
                continue
        else:
            continue
        p = projects.get(vm.project)
        if p is None:
            p = projects[vm.project] = _Project()
        if vm.idle:
            p.lenders.append((u, vm.host, rack_of[vm.host]))
        else:
            p.borrowers.append((u, vm.host, rack_of[vm.host], order))
    return left, need, projects


def _buckets(field, lenders, borrowers):
    """Lenders and borrowers that share FIELD (None: all of them).

    :returns: a list of (first borrower's order, lender uuids, borrower
        uuids), one for each place that has both.
    """
    if field is None:
        if lenders and borrowers:
            return [(borrowers[0][ORDER], [c[UUID] for c in lenders],
                     [c[UUID] for c in borrowers])]
        return []
    lender_places = {c[field] for c in lenders}
    found = {}
    for c in borrowers:
        at = c[field]
        if at in lender_places:
            bucket = found.get(at)
            if bucket is None:
                found[at] = bucket = (c[ORDER], [], [])
            bucket[2].append(c[UUID])
    for c in lenders:
        bucket = found.get(c[field])
        if bucket is not None:
            bucket[1].append(c[UUID])
    return list(found.values())


def plan_pairs(cluster, min_lend_mb=256, max_per_borrower_mb=0):
    """One planning round over CLUSTER (a model.Cluster).

    :param min_lend_mb: a lender must have at least this much free memory
        left to take part (MiB).
    :param max_per_borrower_mb: cap on what one borrower gets per round
        (MiB, 0 = its whole demand).
    :returns: a Plan: pairs kept, new pairs, pairs to revoke.

    Example: lender L (idle, 4096 MiB free) and borrowers B1 (2048 MiB
    missing, same host) and B2 (3072 MiB missing, other rack) of one
    project give L->B1 2048 (host level first), then L->B2 2048.
    """
    vms = cluster.vms
    keep, revoke = [], []
    for pair in cluster.pairs:
        (keep if _still_valid(vms, pair) else revoke).append(pair)
    left, need, projects = _candidates(cluster, keep, min_lend_mb)

    # Each project is matched level by level on its own (no pair crosses
    # projects); the buckets are then put in the plain algorithm's order:
    # by level, then by the order of their first borrower.
    matched = []
    for p in projects.values():
        lenders, borrowers = p.lenders, p.borrowers
        buckets = ()
        for rank, level in enumerate(LEVELS):
            if buckets:
                # The level before matched some: only a match changes
                # what the project's VMs have left, and it may leave a
                # lender under min_lend_mb or a borrower satisfied.
                lenders = [c for c in lenders
                           if left[c[UUID]] >= min_lend_mb]
                borrowers = [c for c in borrowers if need[c[UUID]] > 0]
            buckets = _buckets(SHARED[level], lenders, borrowers)
            for first, ls, bs in buckets:
                matched.append(((rank, first), _match(
                    ls, bs, left, need, max_per_borrower_mb)))
    matched.sort(key=operator.itemgetter(0))
    new = one_pair_each(keep, [pair for _rank, pairs in matched
                               for pair in pairs])
    return Plan(tuple(keep), tuple(new), tuple(revoke))


def one_pair_each(keep, new):
    """NEW without the pairs of a lender and borrower already paired.

    A borrower that still misses cache may be matched again with a lender
    it borrows from (a kept pair, or a match at an earlier level) when the
    lender has memory left.  One lender and one borrower have one pair
    (the scheduler stores them under that unique key): the first one
    stays as it is, and what the later match would have added is not
    lent this round.  Before this, the scheduler's round failed on the
    duplicate row and lost its revocations (lab cloud, 2026-12-01).
    """
    taken = {(p.lender, p.borrower) for p in keep}
    out = []
    for p in new:
        if (p.lender, p.borrower) not in taken:
            taken.add((p.lender, p.borrower))
            out.append(p)
    return out
