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
"""Guests told of their lending pairs through their agents."""

import base64
import json
import logging

import fixtures
import testtools

from puma_nova.compute import guest_agent
from puma_nova.compute import guest_pairs
from puma_nova import lending_address

L, B, C = 'lender-uuid', 'borrower-uuid', 'other-uuid'
PAIR = {'lender': L, 'borrower': B, 'capacity_mb': 256, 'key': 'k' * 32,
        'lender_address': lending_address.address(L),
        'borrower_address': lending_address.address(B)}


class FakeExecAgent(object):
    """guest-exec of puma-pairs in each guest: records what it was fed."""

    def __init__(self, told, fail=None):
        self.told = told
        self.fail = fail or {}
        self.procs = {}

    def __call__(self, domain, text, timeout, flags):
        cmd = json.loads(text)
        args = cmd.get('arguments', {})
        if cmd['execute'] == 'guest-exec':
            if domain in self.fail and self.fail[domain] == 'no agent':
                raise RuntimeError('Guest agent is not responding')
            assert args['path'] == guest_pairs.TOOL
            stdin = base64.b64decode(args['input-data']).decode()
            pid = len(self.procs) + 1
            self.procs[pid] = (domain, stdin)
            return json.dumps({'return': {'pid': pid}})
        if cmd['execute'] == 'guest-exec-status':
            domain, stdin = self.procs[args['pid']]
            if self.fail.get(domain) == 'exit':
                return json.dumps({'return': {
                    'exited': True, 'exitcode': 3, 'err-data':
                    base64.b64encode(b'puma-pairs: no module').decode()}})
            self.told.append((domain, stdin))
            return json.dumps({'return': {
                'exited': True, 'exitcode': 0, 'out-data':
                base64.b64encode(b'puma-pairs: role x').decode()}})
        raise AssertionError(cmd)


class GuestPairsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.here = {L, B}
        self.told = []
        self.fake = FakeExecAgent(self.told)
        self.pairs = guest_pairs.GuestPairs(
            lambda u: u if u in self.here else None, 7400, 2,
            agent=lambda dom, t: guest_agent.Agent(dom, t,
                                                   command=self.fake))

    def test_each_end_is_told_its_side_once(self):
        self.pairs.set_pairs([PAIR])
        self.assertTrue(self.pairs.changed.is_set())
        self.assertEqual(0, self.pairs.sync())
        told = dict(self.told)
        self.assertEqual('link %s\nlend %s %s\n' % (
            lending_address.mac(L), PAIR['borrower_address'], PAIR['key']),
            told[L])
        self.assertEqual('link %s\nborrow %s 7400 %s\n' % (
            lending_address.mac(B), PAIR['lender_address'], PAIR['key']),
            told[B])
        # The same pairs again: nobody is told anything.
        self.pairs.set_pairs([PAIR])
        self.pairs.sync()
        self.assertEqual(2, len(self.told))

    def test_a_revoked_pair_is_told_then_forgotten(self):
        self.pairs.set_pairs([PAIR])
        self.pairs.sync()
        self.pairs.set_pairs([])
        self.pairs.sync()
        self.assertEqual({L: 'link %s\n' % lending_address.mac(L),
                          B: 'link %s\n' % lending_address.mac(B)},
                         dict(self.told[2:]))
        del self.told[:]
        self.pairs.set_pairs([])
        self.pairs.sync()
        self.assertEqual([], self.told)

    def test_a_failed_guest_is_tried_again(self):
        # The operator reads why in nova-compute's log, each time.
        log = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        self.fake.fail[B] = 'no agent'
        self.pairs.set_pairs([PAIR])
        self.assertEqual(1, self.pairs.sync())
        self.assertIn('instance %s was not told' % B, log.output)
        self.assertIn('not responding', log.output)
        self.assertEqual([L], [d for d, _ in self.told])
        self.fake.fail[B] = 'exit'
        self.assertEqual(1, self.pairs.sync())
        self.assertIn('exited with 3: puma-pairs: no module', log.output)
        del self.fake.fail[B]
        self.assertEqual(0, self.pairs.sync())
        self.assertEqual([L, B], [d for d, _ in self.told])
        # Told: nothing is left to try again.
        self.assertEqual(0, self.pairs.sync())
        self.assertEqual([L, B], [d for d, _ in self.told])

    def test_guests_elsewhere_are_not_asked(self):
        self.here = {L}
        self.pairs.set_pairs([PAIR])
        self.pairs.sync()
        self.assertEqual([L], [d for d, _ in self.told])
        # Gone from this host: not asked again.
        self.pairs.sync()
        self.assertEqual(1, len(self.told))


class RunTest(testtools.TestCase):

    def test_a_command_that_never_ends_is_given_up(self):
        def command(domain, text, timeout, flags):
            if json.loads(text)['execute'] == 'guest-exec':
                return json.dumps({'return': {'pid': 7}})
            return json.dumps({'return': {'exited': False}})
        agent = guest_agent.Agent('d', 1, command=command)
        e = self.assertRaises(guest_agent.AgentError, agent.run, 'x',
                              wait=0.05, poll=0.01)
        self.assertIn('did not end', str(e))

    def test_output_is_bounded(self):
        big = base64.b64encode(b'x' * 100000).decode()

        def command(domain, text, timeout, flags):
            if json.loads(text)['execute'] == 'guest-exec':
                return json.dumps({'return': {'pid': 7}})
            return json.dumps({'return': {'exited': True, 'exitcode': 0,
                                          'out-data': big,
                                          'err-data': 'not base64!'}})
        code, out, err = guest_agent.Agent('d', 1, command=command).run('x')
        self.assertEqual((0, guest_agent.MAX_BYTES, ''),
                         (code, len(out), err))
