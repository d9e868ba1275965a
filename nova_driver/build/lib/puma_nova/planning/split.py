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
"""Split migration: where the memory of a VM goes when the main host is short.

Description:
    A VM live-migrated to a main host that cannot hold all of its memory
    keeps ``resident_limit_mb`` there and the rest on a memory server on a
    sub host.  The sub host is the host, other than the main and the
    source, with the most free memory in the main host's rack (lowest RTT),
    else anywhere; it must hold the remote part above its own reserve.

Requirements:
    Free memory per host (placement's view plus the lending ledger).

Limitations:
    One sub host per VM (mirroring onto a second one is the caller's
    choice: call again excluding the first).
"""

import dataclasses


class PlanError(Exception):
    """No split plan exists; the message says why."""


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    vm: str
    main_host: str
    sub_host: str
    resident_limit_mb: int
    remote_mb: int


def plan_split(cluster, vm_uuid, main_host, reserve_mb=512,
               min_resident_ratio=0.25, exclude=()):
    """Plan the split migration of VM_UUID to MAIN_HOST.

    :param reserve_mb: memory every host keeps for itself (MiB).
    :param min_resident_ratio: refuse if less than this fraction of the
        VM would stay resident on the main host.
    :param exclude: hosts that may not be the sub host.
    :returns: a SplitPlan, or None when the VM fits on MAIN_HOST whole.
    :raises PlanError: no acceptable plan, with the reason.

    Example: a 16384 MiB VM to a main host with 8704 MiB free keeps
    8192 MiB resident (8704 - 512) and puts 8192 MiB on the same-rack host
    with the most free memory, if it has at least 8704 MiB free.
    """
    vm = cluster.vms.get(vm_uuid)
    if vm is None:
        raise PlanError('unknown server %s' % vm_uuid)
    main = cluster.hosts.get(main_host)
    if main is None:
        raise PlanError('unknown host %s' % main_host)
    if main_host == vm.host:
        raise PlanError('server %s already runs on %s' % (vm_uuid, main_host))
    resident = main.free_mb - reserve_mb
    if resident >= vm.ram_mb:
        return None
    if resident < vm.ram_mb * min_resident_ratio:
        raise PlanError(
            'host %s can keep only %d MiB of the %d MiB of server %s '
            '(less than %d%%)' % (main_host, max(resident, 0), vm.ram_mb,
                                  vm_uuid, min_resident_ratio * 100))
    remote = vm.ram_mb - resident
    best = None
    for h in cluster.hosts.values():
        if h.name in (main_host, vm.host) or h.name in exclude:
            continue
        if h.free_mb - reserve_mb < remote:
            continue
        rank = (h.rack == main.rack, h.free_mb, h.name)
        if best is None or rank > best[0]:
            best = (rank, h)
    if best is None:
        raise PlanError('no host can hold the %d MiB of server %s that do '
                        'not fit on %s' % (remote, vm_uuid, main_host))
    return SplitPlan(vm_uuid, main_host, best[1].name, resident, remote)
