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

import os_resource_classes as orc
import testtools

from puma_nova.virt import ledger

ENTRIES = [
    {'instance_uuid': 'a', 'main_host': 'm', 'sub_host': 's', 'mb': 2048,
     'state': 'running'},
    {'instance_uuid': 'b', 'main_host': 'm', 'sub_host': 't', 'mb': 1024,
     'state': 'planned'},
    {'instance_uuid': 'c', 'main_host': 't', 'sub_host': 'm', 'mb': 512,
     'state': 'done'},
    {'instance_uuid': 'd', 'main_host': 'm', 'sub_host': 's', 'mb': 4096,
     'state': 'failed'},
]


def _inventory():
    return {orc.MEMORY_MB: {'total': 8192, 'max_unit': 8192,
                            'reserved': 512, 'min_unit': 1,
                            'step_size': 1, 'allocation_ratio': 1.0},
            orc.VCPU: {'total': 4, 'max_unit': 4, 'reserved': 0}}


class LedgerTest(testtools.TestCase):

    def test_totals(self):
        self.assertEqual((3072, 512), ledger.totals(ENTRIES, 'm'))
        self.assertEqual((0, 2048), ledger.totals(ENTRIES, 's'))
        self.assertEqual((512, 1024), ledger.totals(ENTRIES, 't'))
        self.assertEqual((0, 0), ledger.totals(ENTRIES, 'x'))

    def test_apply(self):
        inv = _inventory()
        out = ledger.apply(inv, 3072, 512)
        self.assertEqual(11264, out[orc.MEMORY_MB]['total'])
        self.assertEqual(11264, out[orc.MEMORY_MB]['max_unit'])
        self.assertEqual(1024, out[orc.MEMORY_MB]['reserved'])
        self.assertEqual(inv[orc.VCPU], out[orc.VCPU])
        # The input is left alone.
        self.assertEqual(8192, inv[orc.MEMORY_MB]['total'])

    def test_apply_nothing(self):
        self.assertEqual(_inventory(), ledger.apply(_inventory(), 0, 0))

    def test_reserved_never_above_total(self):
        out = ledger.apply(_inventory(), 0, 100000)
        self.assertEqual(8192, out[orc.MEMORY_MB]['reserved'])


class LedgerCacheTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 0
        self.answers = []
        self.cache = ledger.LedgerCache(self._fetch, 30,
                                        clock=lambda: self.now)

    def _fetch(self, host):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def test_cached_until_max_age(self):
        self.answers = [ENTRIES[:1], ENTRIES[:2]]
        self.assertEqual(ENTRIES[:1], self.cache.refresh('m'))
        self.now = 29
        self.assertEqual(ENTRIES[:1], self.cache.refresh('m'))
        self.now = 30
        self.assertEqual(ENTRIES[:2], self.cache.refresh('m'))

    def test_get_never_fetches(self):
        self.assertEqual([], self.cache.get('m'))
        self.answers = [ENTRIES[:1]]
        self.cache.refresh('m')
        self.cache.invalidate()
        self.now = 1000
        # Nothing left to answer: get() would fail if it fetched.
        self.assertEqual(ENTRIES[:1], self.cache.get('m'))

    def test_invalidate(self):
        self.answers = [ENTRIES[:1], ENTRIES[:2]]
        self.cache.refresh('m')
        self.cache.invalidate()
        self.assertEqual(ENTRIES[:2], self.cache.refresh('m'))
        self.assertEqual(ENTRIES[:2], self.cache.get('m'))

    def test_invalidated_while_reading(self):
        # A split event during a read: what was read is used, but the
        # next refresh reads again.
        def fetch(host):
            self.cache.invalidate()
            return ENTRIES[:1]

        self.cache._fetch = fetch
        self.assertEqual(ENTRIES[:1], self.cache.refresh('m'))
        self.cache._fetch = self._fetch
        self.answers = [ENTRIES[:2]]
        self.assertEqual(ENTRIES[:2], self.cache.refresh('m'))

    def test_scheduler_away_keeps_last(self):
        self.answers = [ENTRIES[:2], RuntimeError('timeout'), ENTRIES[:1]]
        self.assertEqual(ENTRIES[:2], self.cache.refresh('m'))
        self.cache.invalidate()
        self.assertEqual(ENTRIES[:2], self.cache.refresh('m'))
        # No retry at every call after a failure...
        self.assertEqual(ENTRIES[:2], self.cache.refresh('m'))
        # ...but after max_age.
        self.now = 30
        self.assertEqual(ENTRIES[:1], self.cache.refresh('m'))

    def test_never_read(self):
        self.answers = [RuntimeError('timeout')]
        self.assertEqual([], self.cache.refresh('m'))
        self.assertEqual([], self.cache.get('m'))


class ReservedKeeperTest(testtools.TestCase):
    """The sub host keeps what puma-scheduler wrote to placement."""

    def setUp(self):
        super().setUp()
        self.keeper = ledger.ReservedKeeper()

    def test_new_provider_gets_the_ledgers(self):
        self.assertEqual(2048, self.keeper.reserved(None, 2048, 1))

    def test_agreement(self):
        self.assertEqual(2048, self.keeper.reserved(2048, 2048, 1))
        self.assertEqual(2048, self.keeper.reserved(2048, 2048, 2))

    def test_ledger_read_older_than_the_plan_never_resets_it(self):
        # The scheduler wrote 512 + 2048; the read before the plan says
        # 512, and it is used at many updates until it is read again.
        for _ in range(5):
            self.assertEqual(2560, self.keeper.reserved(2560, 512, 7))

    def test_ledger_read_newer_than_the_report_clients_cache(self):
        # The plan's entry is read, the report client's provider tree
        # still has what placement had before: nothing to write (no
        # change), the next read agrees with placement.
        self.assertEqual(512, self.keeper.reserved(512, 2560, 7))
        self.assertEqual(2560, self.keeper.reserved(2560, 2560, 8))

    def test_lasting_disagreement_is_corrected(self):
        # The scheduler could not give 2048 MiB back (placement away):
        # two reads agree with each other, not with placement.
        self.assertEqual(2560, self.keeper.reserved(2560, 512, 7))
        self.assertEqual(2560, self.keeper.reserved(2560, 512, 7))
        self.assertEqual(512, self.keeper.reserved(2560, 512, 8))

    def test_changing_disagreement_starts_over(self):
        self.assertEqual(2560, self.keeper.reserved(2560, 512, 7))
        # Placement changed meanwhile (another plan): a new doubt.
        self.assertEqual(4608, self.keeper.reserved(4608, 512, 8))
        self.assertEqual(512, self.keeper.reserved(4608, 512, 9))

    def test_agreement_clears_the_doubt(self):
        self.assertEqual(2560, self.keeper.reserved(2560, 512, 7))
        self.assertEqual(2560, self.keeper.reserved(2560, 2560, 8))
        self.assertEqual(2560, self.keeper.reserved(2560, 512, 9))


class LedgerCacheSerialTest(testtools.TestCase):

    def test_serial_counts_reads(self):
        reads = []
        cache = ledger.LedgerCache(lambda h: reads.append(h) or [], 60)
        self.assertEqual(0, cache.serial)
        cache.refresh('h')
        self.assertEqual(1, cache.serial)
        # A fresh read is not read again.
        cache.refresh('h')
        self.assertEqual(1, cache.serial)
        cache.invalidate()
        cache.refresh('h')
        self.assertEqual(2, cache.serial)
        self.assertEqual(['h', 'h'], reads)
