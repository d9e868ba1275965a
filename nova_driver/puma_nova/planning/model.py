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
"""The cluster model the planners read: hosts, VMs and lending pairs.

Plain immutable records, built by the scheduler service from the statistics
compute nodes report (or by tests from scenario files).  Memory is in MiB.
"""

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    rack: str
    ram_mb: int
    free_mb: int


@dataclasses.dataclass(frozen=True)
class VM:
    """A server as the planner sees it.

    ``idle``: the guest module's activity detector reports no activity.
    ``free_mb``: guest memory it could lend (free minus its own reserve).
    ``cache_demand_mb``: page cache it is missing (refaults), 0 if none.
    ``lending_grace``: not idle, but only since its last report (the
    first report of its CPU above the limit after a quiet one): its pairs
    are kept, it gets no new one.
    """

    uuid: str
    host: str
    project: str
    ram_mb: int
    idle: bool = False
    free_mb: int = 0
    cache_demand_mb: int = 0
    lending_grace: bool = False


@dataclasses.dataclass(frozen=True)
class Pair:
    """LENDER lends MB of its free memory to BORROWER as remote cache."""

    lender: str
    borrower: str
    mb: int


@dataclasses.dataclass(frozen=True)
class Cluster:
    hosts: dict
    vms: dict
    pairs: tuple = ()

    @classmethod
    def build(cls, hosts, vms, pairs=()):
        return cls({h.name: h for h in hosts}, {v.uuid: v for v in vms},
                   tuple(pairs))

    @classmethod
    def from_json(cls, text):
        """A cluster from the scenario format used by the tests."""
        doc = json.loads(text)
        return cls.build([Host(**h) for h in doc['hosts']],
                         [VM(**v) for v in doc['vms']],
                         [Pair(**p) for p in doc.get('pairs', ())])
