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

import testtools

from puma_nova.compute import lending


def _pair(**kw):
    pair = {'borrower': 'b1', 'lender': 'l1',
            'borrower_address': '10.9.0.2', 'lender_address': '10.9.0.3',
            'capacity_mb': 512, 'key': 'k'}
    pair.update(kw)
    return pair


class LendingTest(testtools.TestCase):

    def test_validate(self):
        self.assertEqual([_pair()], lending.validate([_pair()]))
        for bad in ('x', [1], [{'borrower': 'b'}],
                    [_pair(lender_address='nope')],
                    [_pair(lender_address='fd00::1')],
                    [_pair(capacity_mb=0)], [_pair(capacity_mb='1')]):
            self.assertRaises(lending.InvalidPairs, lending.validate, bad)

    def test_ruleset(self):
        text = lending.ruleset([_pair()], 'puma_lending')
        self.assertIn('delete table bridge puma_lending', text)
        self.assertIn('iifname != "pl-*" oifname != "pl-*" return', text)
        for rule in (
                'iifname "pl-b1" ip saddr 10.9.0.2 ip daddr 10.9.0.3 accept',
                'iifname != "pl-*" ip saddr 10.9.0.2 ip daddr 10.9.0.3 '
                'accept',
                'iifname "pl-l1" ip saddr 10.9.0.3 ip daddr 10.9.0.2 accept',
                'iifname != "pl-*" ip saddr 10.9.0.3 ip daddr 10.9.0.2 '
                'accept'):
            self.assertIn(rule, text)
        self.assertTrue(text.rstrip().endswith('drop\n  }\n}'))

    def test_apply_disabled_records(self):
        calls = []
        channel = lending.LendingChannel('br-puma', 't',
                                         execute=calls.append)
        channel.apply([_pair()])
        self.assertEqual([], calls)
        self.assertEqual([_pair()], channel.pairs)

    def test_apply_enabled_runs_nft(self):
        calls = []
        channel = lending.LendingChannel(
            'br-puma', 't', enabled=True,
            execute=lambda *a, **kw: calls.append((a, kw)))
        channel.apply([])
        self.assertEqual(('nft', '-f', '-'), calls[0][0])
        self.assertIn('drop', calls[0][1]['process_input'])

    def test_bad_pairs_change_nothing(self):
        channel = lending.LendingChannel('br-puma', 't')
        channel.apply([_pair()])
        self.assertRaises(lending.InvalidPairs, channel.apply, [{}])
        self.assertEqual([_pair()], channel.pairs)

    def test_tap_name(self):
        self.assertEqual('pl-0123456789a', lending.tap_name(
            '01234567-89ab-cdef-0123-456789abcdef'))
