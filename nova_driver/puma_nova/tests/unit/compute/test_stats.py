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

from unittest import mock

import fixtures
from oslo_config import cfg
import testtools

from puma_nova.compute import stats
from puma_nova.conf import compute as puma_conf
from puma_nova import lending_address
from puma_nova.tests.unit.compute import test_guest_agent


def _guest(uuid, major_fault):
    guest = mock.Mock(uuid=uuid)
    guest._domain.memoryStats.return_value = {
        'actual': 1048576, 'rss': 524288, 'unused': 262144,
        'major_fault': major_fault}
    guest._domain.XMLDesc.return_value = '<domain/>'
    return guest


class RefaultsTest(testtools.TestCase):
    """report_host wants faults since the last report, not a total."""

    def test_faults_are_reported_as_deltas(self):
        uuid = 'a1b2c3d4-0000-0000-0000-000000000001'
        first = stats.guest_stats(_guest(uuid, 1000))
        second = stats.guest_stats(_guest(uuid, 1250))
        self.assertEqual(0, first['refaults'])
        self.assertEqual(250, second['refaults'])
        self.assertEqual(1024, second['memory_mb'])
        self.assertEqual(256, second['free_mb'])

    def test_a_restarted_guest_starts_over(self):
        uuid = 'a1b2c3d4-0000-0000-0000-000000000002'
        stats.guest_stats(_guest(uuid, 5000))
        self.assertEqual(0, stats.guest_stats(_guest(uuid, 10))['refaults'])
        self.assertEqual(5, stats.guest_stats(_guest(uuid, 15))['refaults'])


VMSTAT = 'nr_free_pages 100\npgpgin %d\nworkingset_refault_file %d\n'


class _AgentTestCase(testtools.TestCase):
    """Default options, and a guest agent over the dict self.files."""

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        puma_conf.register_opts(conf)
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.stats.CONF', conf))
        self.files = {}
        self.fake = test_guest_agent.FakeAgent(self.files)
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.guest_agent._libvirt_qemu',
            lambda: mock.Mock(qemuAgentCommand=self.fake)))
        self.uuid = self.getUniqueString()


class AgentFiguresTest(_AgentTestCase):
    """With a connected guest agent the guest's own counters are used."""

    def _guest(self, state='connected'):
        guest = _guest(self.uuid, 7)
        guest._domain.XMLDesc.return_value = (test_guest_agent.CONNECTED
                                              % state)
        return guest

    def test_refaults_and_miss_rate_from_vmstat(self):
        instance = mock.Mock(project_id='p1')
        self.files['/proc/vmstat'] = VMSTAT % (4000, 100)
        first = stats.guest_stats(self._guest(), instance)
        self.assertEqual(
            (0, 0.0, None),
            (first['refaults'], first['cache_miss_rate'], first['puma']))
        self.assertEqual('p1', first['project_id'])
        # 8000 KiB read (2000 pages), 500 of them refaults.
        self.files['/proc/vmstat'] = VMSTAT % (12000, 600)
        self.files['/sys/kernel/puma/stats'] = 'gets 10\nhits 9\n'
        second = stats.guest_stats(self._guest(), instance)
        self.assertEqual(500, second['refaults'])
        self.assertEqual(0.25, second['cache_miss_rate'])
        self.assertEqual({'gets': 10, 'hits': 9}, second['puma'])
        # Nothing read from disk: no misses.
        third = stats.guest_stats(self._guest(), instance)
        self.assertEqual((0, 0.0), (third['refaults'],
                                    third['cache_miss_rate']))

    def test_the_rate_is_at_most_one(self):
        self.files['/proc/vmstat'] = VMSTAT % (0, 0)
        stats.guest_stats(self._guest())
        # A guest claiming more refaults than pages read.
        self.files['/proc/vmstat'] = VMSTAT % (4, 1000)
        self.assertEqual(1.0, stats.guest_stats(
            self._guest())['cache_miss_rate'])

    def test_no_agent_no_question(self):
        self.files['/proc/vmstat'] = VMSTAT % (4000, 100)
        entry = stats.guest_stats(self._guest('disconnected'))
        self.assertEqual([], self.fake.calls)
        self.assertEqual((0.0, None), (entry['cache_miss_rate'],
                                       entry['puma']))

    def test_a_lying_agent_leaves_libvirt_figures(self):
        stats.guest_stats(_guest(self.uuid, 5))
        self.files['/proc/vmstat'] = 'pgpgin 1\npgpgin 2\n'
        entry = stats.guest_stats(self._guest())
        self.assertEqual(2, entry['refaults'])    # libvirt: 7 - 5
        self.assertEqual((0.0, None), (entry['cache_miss_rate'],
                                       entry['puma']))
        self.assertEqual(3, len(self.fake.calls))

    def test_retain_forgets_guests_that_left(self):
        self.files['/proc/vmstat'] = VMSTAT % (4000, 100)
        stats.guest_stats(self._guest())
        stats.retain([])
        self.files['/proc/vmstat'] = VMSTAT % (8000, 200)
        # A first report again: no delta against the forgotten totals.
        self.assertEqual(0, stats.guest_stats(self._guest())['refaults'])


class LendableTest(_AgentTestCase):
    """Only an idle guest on the lending channel is offered as a lender."""

    def _report(self, cpu_s, at_s, nic=True, vcpus=2):
        guest = _guest(self.uuid, 0)
        xml = test_guest_agent.CONNECTED % 'connected'
        if nic:
            xml = xml.replace('</devices>', "<interface><mac address='%s'/>"
                              "</interface></devices>"
                              % lending_address.mac(self.uuid))
        guest._domain.XMLDesc.return_value = xml
        guest._domain.info.return_value = [1, 524288, 524288, vcpus,
                                           int(cpu_s * 1e9)]
        return stats.guest_stats(guest, now=at_s)

    def test_idle_after_a_quiet_interval(self):
        first = self._report(10.0, 100.0)
        self.assertEqual(lending_address.address(self.uuid),
                         first['lending_address'])
        # Nothing to compare with yet: not offered.
        self.assertFalse(first['lendable'])
        # 0.5 s of CPU over 10 s on 2 vCPUs: 2.5 %.
        self.assertTrue(self._report(10.5, 110.0)['lendable'])
        # 3 s over 10 s on 2 vCPUs: 15 %, above the 10 % default. Once,
        # after a quiet report, it is in grace (its pairs are kept: the
        # work of a new pair), not lendable (no new pair); twice in a row,
        # neither.
        self.assertEqual((False, True), self._lending(13.5, 120.0))
        self.assertEqual((False, False), self._lending(16.5, 130.0))
        self.assertEqual((False, False), self._lending(19.5, 140.0))
        # Quiet again, then one report above: grace again.
        self.assertEqual((True, False), self._lending(19.6, 150.0))
        self.assertEqual((False, True), self._lending(22.6, 160.0))

    def _lending(self, cpu_s, at_s):
        entry = self._report(cpu_s, at_s)
        return entry['lendable'], entry['lending_grace']

    def test_a_busy_guest_gets_no_grace(self):
        self._report(10.0, 100.0)
        # Above the threshold from its first figure: not offered, until a
        # quiet report.
        self.assertEqual((False, False), self._lending(13.0, 110.0))
        self.assertEqual((True, False), self._lending(13.1, 120.0))
        stats.retain([])
        # Forgotten: a first report again, then busy without grace.
        self.assertEqual((False, False), self._lending(13.3, 140.0))
        self.assertEqual((False, False), self._lending(16.3, 150.0))

    def test_grace_never_outlasts_the_module_or_refaults(self):
        self._report(10.0, 100.0)
        self.files['/proc/vmstat'] = VMSTAT % (0, 0)
        self.assertEqual((True, False), self._lending(10.1, 110.0))
        self.files['/sys/kernel/puma/stats'] = 'lender_busy 1\n'
        self.assertEqual((False, False), self._lending(13.1, 120.0))
        self.files['/sys/kernel/puma/stats'] = 'lender_busy 0\n'
        self.assertEqual((True, False), self._lending(13.2, 130.0))
        self.files['/proc/vmstat'] = VMSTAT % (400, 100)
        self.assertEqual((False, False), self._lending(16.2, 140.0))

    def test_busy_module_is_not_idle(self):
        self._report(10.0, 100.0)
        self.files['/proc/vmstat'] = VMSTAT % (0, 0)
        self.files['/sys/kernel/puma/stats'] = 'lender_busy 1\n'
        self.assertFalse(self._report(10.0, 110.0)['lendable'])
        self.files['/sys/kernel/puma/stats'] = 'lender_busy 0\n'
        self.assertTrue(self._report(10.0, 120.0)['lendable'])

    def test_a_guest_missing_cache_is_not_idle(self):
        self.files['/proc/vmstat'] = VMSTAT % (0, 0)
        self._report(10.0, 100.0)
        # Quiet CPU, but 100 pages read again since the last report.
        self.files['/proc/vmstat'] = VMSTAT % (400, 100)
        self.assertFalse(self._report(10.1, 110.0)['lendable'])
        self.assertTrue(self._report(10.2, 120.0)['lendable'])

    def test_no_lending_interface_never_lends(self):
        self._report(10.0, 100.0, nic=False)
        entry = self._report(10.0, 110.0, nic=False)
        self.assertEqual((None, False), (entry['lending_address'],
                                         entry['lendable']))
