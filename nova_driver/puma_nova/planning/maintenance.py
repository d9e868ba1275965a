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
"""Host maintenance: empty a host, splitting the VMs no other host fits.

Description:
    Every VM of the host to empty moves, largest first.  A VM goes whole to
    the host it fits best (the least free memory that still holds it above
    the reserve), so that large holes stay for large VMs.  A VM that no
    host holds whole and whose flavor allows splitting is split-migrated
    (:func:`puma_nova.planning.split.plan_split`): to the main host with
    the most free memory that can keep enough of it resident, its remote
    part on a memory server of another host.  Each move takes its memory
    from the hosts it uses before the next VM is planned.

Requirements:
    Free memory per host (placement's view plus the lending ledger, or
    Watcher's compute model).

Limitations:
    Memory only (CPU and disk are the caller's to check); one plan, no
    search over orders of the VMs.
"""

import dataclasses

from puma_nova.planning import model
from puma_nova.planning import split


@dataclasses.dataclass(frozen=True)
class Move:
    """VM moves to DEST; split: RESIDENT_MB stay there, the rest on SUB."""

    vm: str
    dest: str
    sub_host: str = None
    resident_limit_mb: int = 0
    remote_mb: int = 0

    @property
    def split(self):
        return self.sub_host is not None


def plan_evacuation(cluster, host, reserve_mb=512, min_resident_ratio=0.25,
                    splittable=lambda vm: True, exclude=()):
    """Moves that empty HOST of every VM of CLUSTER on it.

    :param splittable: VM -> whether its flavor allows a split migration.
    :param exclude: hosts that take nothing (e.g. disabled ones).
    :returns: a list of Move, in the order to carry them out.
    :raises split.PlanError: a VM can go nowhere; the message says which.
    """
    if host not in cluster.hosts:
        raise split.PlanError('unknown host %s' % host)
    free = {h.name: h.free_mb for h in cluster.hosts.values()
            if h.name != host and h.name not in exclude}
    vms = sorted((v for v in cluster.vms.values() if v.host == host),
                 key=lambda v: (-v.ram_mb, v.uuid))
    moves = []
    for vm in vms:
        fits = [(f, name) for name, f in free.items()
                if f - reserve_mb >= vm.ram_mb]
        if fits:
            dest = min(fits)[1]
            free[dest] -= vm.ram_mb
            moves.append(Move(vm.uuid, dest))
            continue
        if not splittable(vm):
            raise split.PlanError(
                'no host can hold server %s (%d MiB) and its flavor does '
                'not allow a split migration' % (vm.uuid, vm.ram_mb))
        now = model.Cluster(
            {name: dataclasses.replace(cluster.hosts[name], free_mb=f)
             for name, f in free.items()} |
            {host: cluster.hosts[host]}, cluster.vms)
        plan = None
        why = []
        for _f, main in sorted(((f, n) for n, f in free.items()),
                               reverse=True):
            try:
                plan = split.plan_split(now, vm.uuid, main, reserve_mb,
                                        min_resident_ratio,
                                        exclude=(host,) + tuple(exclude))
                break
            except split.PlanError as e:
                why.append(str(e))
        if plan is None:
            raise split.PlanError(
                'server %s (%d MiB) can go nowhere, whole or split: %s'
                % (vm.uuid, vm.ram_mb, '; '.join(why) or 'no other host'))
        free[plan.main_host] -= plan.resident_limit_mb
        free[plan.sub_host] -= plan.remote_mb
        moves.append(Move(vm.uuid, plan.main_host, plan.sub_host,
                          plan.resident_limit_mb, plan.remote_mb))
    return moves
