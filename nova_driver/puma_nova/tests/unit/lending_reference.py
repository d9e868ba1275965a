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
"""The straightforward lending round, kept as the reference for tests.

This is the planner as first written (before it was indexed for speed):
every level groups every candidate by its bucket key and matches each
bucket that has lenders and borrowers, buckets in the order their first
borrower appears.  puma_nova.planning.lending must produce exactly the
same Plan, pair for pair and in the same order.
"""

import collections

from puma_nova.planning import lending
from puma_nova.planning import model


def _match(bucket_lenders, bucket_borrowers, left, need, cap):
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


def _still_valid(cluster, pair):
    lender = cluster.vms.get(pair.lender)
    borrower = cluster.vms.get(pair.borrower)
    return (lender is not None and borrower is not None and
            (lender.idle or lender.lending_grace) and
            not borrower.idle and lender.project == borrower.project)


def plan_pairs(cluster, min_lend_mb=256, max_per_borrower_mb=0):
    keep, revoke = [], []
    for pair in cluster.pairs:
        (keep if _still_valid(cluster, pair) else revoke).append(pair)

    left = {}
    need = {}
    for vm in cluster.vms.values():
        if vm.lending_grace:
            continue
        if vm.idle:
            left[vm.uuid] = vm.free_mb
        elif vm.cache_demand_mb > 0:
            need[vm.uuid] = vm.cache_demand_mb
    for pair in keep:
        left[pair.lender] = left.get(pair.lender, 0) - pair.mb
        if pair.borrower in need:
            need[pair.borrower] -= pair.mb

    keys = {level: {} for level in lending.LEVELS}
    for u in list(left) + list(need):
        vm = cluster.vms[u]
        keys['host'][u] = (vm.project, vm.host)
        keys['rack'][u] = (vm.project, cluster.hosts[vm.host].rack)
        keys['any'][u] = vm.project

    new = []
    for level in lending.LEVELS:
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
    new = lending.one_pair_each(keep, new)
    return lending.Plan(tuple(keep), tuple(new), tuple(revoke))
