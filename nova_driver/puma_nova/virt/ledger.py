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

"""The lending ledger applied to this host's placement inventory.

Every instance keeps a normal allocation of its whole flavor on its main
host. The ledger, kept by the Puma scheduler, says how much memory each
split instance borrows from its sub host; here it becomes inventory:
the main host's MEMORY_MB total and max_unit grow by what it borrows,
the sub host's MEMORY_MB reserved grows by what it lends.

The Puma scheduler writes the sub host's part to placement itself when
it plans a split and when it releases one (puma_nova.scheduler
.placement). The periodic update then only confirms it: ReservedKeeper
keeps what placement has while this host's ledger read disagrees with
it, since that read, or the provider tree Nova's report client cached,
may be older than the scheduler's write.
"""

import threading
import time

import os_resource_classes as orc
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

# Ledger entries in these states hold memory; 'failed' ones wait for
# release_split and hold nothing.
HOLDING_STATES = ('planned', 'running', 'done')


def totals(entries, host):
    """(borrowed_mb, lent_mb) of a host from ledger entries."""
    borrowed = lent = 0
    for entry in entries:
        if entry.get('state') not in HOLDING_STATES:
            continue
        mb = int(entry.get('mb') or 0)
        if mb <= 0:
            continue
        if entry.get('main_host') == host:
            borrowed += mb
        if entry.get('sub_host') == host:
            lent += mb
    return borrowed, lent


def apply(inventory, borrowed_mb, lent_mb):
    """Return a copy of a provider inventory with the ledger applied."""
    inventory = {rc: dict(inv) for rc, inv in inventory.items()}
    mem = inventory.get(orc.MEMORY_MB)
    if mem is None or not (borrowed_mb or lent_mb):
        return inventory
    mem['total'] += borrowed_mb
    mem['max_unit'] += borrowed_mb
    # Placement refuses reserved > total; lending more than the host has
    # is a ledger bug, logged by the caller, and must not break the RT.
    mem['reserved'] = min(mem.get('reserved', 0) + lent_mb, mem['total'])
    return inventory


class LedgerCache(object):
    """The last ledger read for this host, refreshed now and then.

    ``get(host)`` only returns what was read last: it never calls the
    Puma scheduler, so the resource tracker, which applies the ledger
    under its lock (update_provider_tree), never waits for RPC there.
    ``refresh(host)`` reads the ledger again (``fetch(host)`` asks the
    Puma scheduler) if the last read is older than max_age or was
    invalidated; the driver calls it outside the resource tracker's lock
    (get_available_resource, before the periodic update takes the lock).
    When a read fails the last entries read stay in use, so the resource
    tracker never breaks nor flips the inventory back and forth because
    the scheduler is away.
    """

    def __init__(self, fetch, max_age, clock=time.monotonic):
        self._fetch = fetch
        self._max_age = max_age
        self._clock = clock
        # Guards the fields below; never held while fetching.
        self._lock = threading.Lock()
        # One fetch at a time.
        self._refresh_lock = threading.Lock()
        self._entries = None
        self._read_at = None
        # Bumped by invalidate(): a read that started before an event is
        # stored but does not count as fresh.
        self._generation = 0
        # Bumped by every successful read.
        self._serial = 0

    @property
    def serial(self):
        """Which read get() returns: it changes with every new read."""
        with self._lock:
            return self._serial

    def invalidate(self):
        with self._lock:
            self._read_at = None
            self._generation += 1

    def get(self, host):
        """The entries read last (never fetches)."""
        with self._lock:
            return list(self._entries or [])

    def _fresh(self, now):
        return (self._read_at is not None and
                now - self._read_at < self._max_age)

    def refresh(self, host):
        """Read the ledger again if it is stale; return the entries."""
        with self._refresh_lock:
            with self._lock:
                now = self._clock()
                if self._fresh(now):
                    return list(self._entries or [])
                generation = self._generation
            try:
                entries = self._fetch(host)
            except Exception as e:
                with self._lock:
                    # Retry after max_age, not at every periodic task.
                    self._read_at = now
                    LOG.warning('Could not read the Puma lending ledger of '
                                '%s, keeping the last one read (%d '
                                'entries): %s', host,
                                len(self._entries or []), e)
                    return list(self._entries or [])
            with self._lock:
                self._entries = list(entries or [])
                self._serial += 1
                if generation == self._generation:
                    self._read_at = now
                return list(self._entries)


class ReservedKeeper(object):
    """The MEMORY_MB reserved this host reports to placement.

    The Puma scheduler changes the sub host's reserved in placement when
    it plans or releases a split (generation-checked), before this host
    reads the new ledger. So when the reserved placement has, as Nova's
    report client last saw it (``current``), differs from the one the
    ledger read last gives (``expected``), either may be the older one:
    the reserved placement has is kept, so that a stale ledger read
    never undoes a plan or a release. The ledger's is written only when
    two different ledger reads, at two periodic updates, disagree with
    placement in the same way: the scheduler could not write placement
    (it was unreachable when a split was released), or the host's
    ``reserved_host_memory_mb`` changed.
    """

    def __init__(self):
        # (current, expected, ledger read serial) of the first update
        # that saw this disagreement.
        self._doubt = None

    def reserved(self, current, expected, serial):
        """The reserved to report.

        :param current: MEMORY_MB reserved in the provider tree before
            this update (placement's, as last read), None if none yet
        :param expected: the reserved the last ledger read gives
        :param serial: LedgerCache.serial of that read
        """
        if current is None or current == expected:
            self._doubt = None
            return expected
        doubt = self._doubt
        if doubt is None or doubt[:2] != (current, expected):
            self._doubt = (current, expected, serial)
            LOG.debug('Puma: placement has MEMORY_MB reserved %d MiB, the '
                      'ledger read last gives %d MiB; keeping placement\'s '
                      'until a new read confirms the ledger\'s',
                      current, expected)
            return current
        if doubt[2] == serial:
            return current
        self._doubt = None
        LOG.info('Puma: placement keeps MEMORY_MB reserved %d MiB, two '
                 'ledger reads give %d MiB; writing the ledger\'s',
                 current, expected)
        return expected
