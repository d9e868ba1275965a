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
    idle, or either VM is gone; kept pairs keep their capacity.  New pairs
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
"""

import collections
import dataclasses

from puma_nova.planning import model

# Locality levels, closest first: what two VMs must share to be "close".
LEVELS = ('host', 'rack', 'any')


@dataclasses.dataclass(frozen=True)
class Plan:
    keep: tuple
    new: tuple
    revoke: tuple

    @property
    def pairs(self):
        return self.keep + self.new


def _still_valid(cluster, pair):
    lender = cluster.vms.get(pair.lender)
    borrower = cluster.vms.get(pair.borrower)
    return (lender is not None and borrower is not None and lender.idle and
            not borrower.idle and lender.project == borrower.project)


def _match(bucket_lenders, bucket_borrowers, left, need, cap):
    """Greedy match inside one locality bucket; updates LEFT and NEED."""
    lenders = sorted(bucket_lenders, key=lambda u: (-left[u], u))
    borrowers = sorted(bucket_borrowers, key=lambda u: (-need[u], u))
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
    keep, revoke = [], []
    for pair in cluster.pairs:
        (keep if _still_valid(cluster, pair) else revoke).append(pair)

    left = {}
    need = {}
    for vm in cluster.vms.values():
        if vm.idle:
            left[vm.uuid] = vm.free_mb
        elif vm.cache_demand_mb > 0:
            need[vm.uuid] = vm.cache_demand_mb
    for pair in keep:
        left[pair.lender] = left.get(pair.lender, 0) - pair.mb
        if pair.borrower in need:
            need[pair.borrower] -= pair.mb

    # The bucket key of every candidate at every level, computed once.
    keys = {level: {} for level in LEVELS}
    for u in list(left) + list(need):
        vm = cluster.vms[u]
        keys['host'][u] = (vm.project, vm.host)
        keys['rack'][u] = (vm.project, cluster.hosts[vm.host].rack)
        keys['any'][u] = vm.project

    new = []
    for level in LEVELS:
        key = keys[level]
        lenders = collections.defaultdict(list)
        borrowers = collections.defaultdict(list)
        for u, mb in left.items():
            if mb >= min_lend_mb:
                lenders[key[u]].append(u)
        for u, mb in need.items():
            if mb > 0:
                borrowers[key[u]].append(u)
        for k, bs in borrowers.items():
            if k in lenders:
                new.extend(_match(lenders[k], bs, left, need,
                                  max_per_borrower_mb))
    return Plan(tuple(keep), tuple(new), tuple(revoke))
