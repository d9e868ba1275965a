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
"""Reading a guest's counters through its agent, which may lie."""

import base64
import json

import testtools

from puma_nova.compute import guest_agent


CONNECTED = """<domain><devices>
<channel type='unix'><source mode='bind' path='/x.sock'/>
<target type='virtio' name='org.qemu.guest_agent.0' state='%s'/>
</channel></devices></domain>"""


class FakeAgent(object):
    """qemu-guest-agent's file commands over a dict of guest files.

    ``answers`` overrides the answer of a command by name (a string is
    returned as the raw JSON text, an exception is raised).
    """

    def __init__(self, files, answers=None):
        self.files = files
        self.answers = answers or {}
        self.open = {}
        self.calls = []

    def __call__(self, domain, text, timeout, flags):
        cmd = json.loads(text)
        name, args = cmd['execute'], cmd.get('arguments', {})
        self.calls.append((name, timeout))
        if name in self.answers:
            answer = self.answers[name]
            if isinstance(answer, Exception):
                raise answer
            return answer
        if name == 'guest-file-open':
            if args['path'] not in self.files:
                raise RuntimeError('internal error: unable to execute QEMU '
                                   'agent command \'guest-file-open\': '
                                   'failed to open file \'%s\' (mode: \'r\')'
                                   ': No such file or directory'
                                   % args['path'])
            handle = 1000 + len(self.open)
            self.open[handle] = self.files[args['path']].encode()
            return json.dumps({'return': handle})
        if name == 'guest-file-read':
            data = self.open[args['handle']][:args['count']]
            eof = len(self.open[args['handle']]) <= args['count']
            return json.dumps({'return': {
                'count': len(data), 'eof': eof,
                'buf-b64': base64.b64encode(data).decode()}})
        if name == 'guest-file-close':
            del self.open[args['handle']]
            return json.dumps({'return': {}})
        raise AssertionError(name)


def _read(files, path, answers=None):
    fake = FakeAgent(files, answers)
    agent = guest_agent.Agent('dom', 2, command=fake)
    return guest_agent.read_counters(agent, path), fake


class ConnectedTest(testtools.TestCase):

    def test_only_a_connected_agent_is_asked(self):
        self.assertTrue(guest_agent.connected(CONNECTED % 'connected'))
        self.assertFalse(guest_agent.connected(CONNECTED % 'disconnected'))
        self.assertFalse(guest_agent.connected('<domain><devices/></domain>'))
        self.assertFalse(guest_agent.connected('not xml'))


class ReadCountersTest(testtools.TestCase):

    def test_counters_and_every_handle_closed(self):
        counters, fake = _read({'/proc/vmstat': 'pgpgin 40\nnr_free 3\n'},
                               '/proc/vmstat')
        self.assertEqual({'pgpgin': 40, 'nr_free': 3}, counters)
        self.assertEqual({}, fake.open)
        self.assertEqual(['guest-file-open', 'guest-file-read',
                          'guest-file-close'], [c[0] for c in fake.calls])
        self.assertEqual({2}, {c[1] for c in fake.calls})

    def test_a_missing_file_is_none(self):
        self.assertIsNone(_read({}, guest_agent.PUMA_STATS)[0])

    def test_malformed_lines_are_refused(self):
        for text in ('pgpgin -1\n', 'pgpgin 1 2\n', 'PGPGIN 1\n',
                     'pgpgin\n', 'a 1\na 2\n', 'big 99999999999999999999\n',
                     'big 9223372036854775808\n', 'x' * 70 + ' 1\n',
                     ''.join('n%d 1\n' % i
                             for i in range(guest_agent.MAX_LINES + 1))):
            self.assertRaises(guest_agent.AgentError, _read,
                              {'/f': text}, '/f')

    def test_a_file_larger_than_the_limit_is_refused(self):
        text = 'a 1\n' * (guest_agent.MAX_BYTES // 4 + 1)
        e = self.assertRaises(guest_agent.AgentError, _read,
                              {'/f': text}, '/f')
        self.assertIn('larger than', str(e))

    def test_an_answer_longer_than_asked_is_refused(self):
        blob = base64.b64encode(b'a 1\n' * guest_agent.MAX_BYTES).decode()
        e = self.assertRaises(
            guest_agent.AgentError, _read, {'/f': ''}, '/f',
            {'guest-file-read': json.dumps({'return': {
                'count': 1, 'eof': True, 'buf-b64': blob}})})
        self.assertIn('more came', str(e))

    def test_garbage_answers_are_errors_not_crashes(self):
        for answers in ({'guest-file-open': 'not json'},
                        {'guest-file-open': json.dumps({'return': 'x'})},
                        {'guest-file-open': json.dumps({'return': True})},
                        {'guest-file-read': json.dumps({'return': []})},
                        {'guest-file-read': json.dumps({'return': {
                            'buf-b64': '!!!', 'eof': True}})},
                        {'guest-file-read': json.dumps({'return': {
                            'buf-b64': base64.b64encode(
                                b'\xff\xfe').decode(), 'eof': True}})},
                        {'guest-file-open': RuntimeError('timed out')}):
            self.assertRaises(guest_agent.AgentError, _read,
                              {'/f': 'a 1\n'}, '/f', answers)

    def test_a_failed_close_does_not_lose_the_counters(self):
        counters, _fake = _read(
            {'/f': 'a 1\n'}, '/f',
            {'guest-file-close': RuntimeError('agent went away')})
        self.assertEqual({'a': 1}, counters)
