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

import testtools

from puma_nova.compute import stats


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
