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

"""The watchdog of memory servers: hung servers are killed and restarted.

The test double speaks the notify protocol as qemu-memory-server does
(WATCHDOG=1 every half of WATCHDOG_USEC); a server is hung when its
process is stopped (SIGSTOP), which keeps it running and listening.
"""

import os
import signal
import socket
import time

import fixtures

from puma_nova.compute import memory_server
from puma_nova.compute import service_notify
from puma_nova.tests.unit.compute import test_memory_server as base

# A server is hung when a check finds no WATCHDOG=1 since the last one
# and the last is over TIMEOUT old: the double, which says it every
# TIMEOUT / 2, would have to be late by several of them between the
# tests' checks (TIMEOUT * 2 apart) on a loaded machine.
TIMEOUT = 1.5


class FakeSocket(object):
    """A NotifySocket whose messages wait in it (the test gives them)."""

    def __init__(self, messages):
        self.messages = messages
        self.path = None

    def receive(self):
        got, self.messages = self.messages, []
        return got

    def close(self):
        pass


class MemoryServersWatchdogTest(base.MemoryServersBase):

    watchdog_timeout = TIMEOUT

    def _stop(self, pid):
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(self._cont, pid)

    @staticmethod
    def _cont(pid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def _until_watched(self, uuid, servers=None):
        """Check until the server has said WATCHDOG=1 once."""
        servers = servers or self.servers
        for _ in range(100):
            self.assertEqual({}, servers.check())
            if servers.list()[uuid].get('watchdog'):
                return servers.list()[uuid]
            time.sleep(0.05)
        self.fail('no WATCHDOG=1 from the server of %s' % uuid)

    def _after_timeout(self):
        time.sleep(TIMEOUT * 2)

    def test_server_gets_its_notify_socket(self):
        self.servers.start('inst-1', 64)
        path = os.path.join(self.dir, 'state', 'memory-server-inst-1.notify')
        self.assertTrue(os.path.exists(path))
        self.assertEqual(0o600, os.stat(path).st_mode & 0o777)
        self._until_watched('inst-1')
        self.assertTrue(self.servers.stop('inst-1'))
        self.assertFalse(os.path.exists(path))

    def test_counters_of_a_running_server(self):
        """Its STATUS= counters reach the state file; never a dead one's."""
        status = ('namespaces=1 pages=3 limit=16384 puts=3 gets=4 '
                  'discards=0 errors=1 connections=2')
        self.useFixture(fixtures.EnvironmentVariable(
            'MEMORY_SERVER_DOUBLE_STATUS', status))
        self.servers.start('inst-1', 64)
        self._until_watched('inst-1')
        want = memory_server.parse_status(status)
        for _ in range(100):
            self.assertEqual({}, self.servers.check())
            if self.servers.list()['inst-1'].get('counters'):
                break
            time.sleep(0.05)
        self.assertEqual(want, self.servers.list()['inst-1']['counters'])
        state = os.path.join(self.dir, 'state')
        self.assertEqual(want, memory_server.read_servers(state)['inst-1'][
            'counters'])
        # Killed: none while it is down, and the new one starts without
        # them (the double started again says the same, later).
        self._kill('inst-1')
        self.assertEqual({}, memory_server.read_servers(state)['inst-1'][
            'counters'])
        self.assertEqual({}, self.servers.check())
        self.assertNotIn('counters', self.servers.list()['inst-1'])

    def test_parse_status(self):
        self.assertEqual(
            {'namespaces': 1, 'pages': 3, 'limit': 16384, 'puts': 3,
             'gets': 4, 'discards': 0, 'errors': 0, 'connections': 0},
            memory_server.parse_status(
                'namespaces=1 pages=3 limit=16384 puts=3 gets=4 discards=0 '
                'errors=0 connections=0'))
        # Other words and values are left out.
        self.assertEqual({'pages': 2}, memory_server.parse_status(
            'listening pages=2 puts=-1 gets=x other=5 connections='))
        self.assertEqual({}, memory_server.parse_status(''))

    def test_a_running_server_is_left_alone(self):
        self.servers.start('inst-1', 64)
        server = self._until_watched('inst-1')
        for _ in range(2):
            self._after_timeout()
            self.assertEqual({}, self.servers.check())
        self.assertEqual(server, self.servers.list()['inst-1'])
        self.assertNotIn('hangs', server)

    def test_a_hung_server_is_killed_and_started_again(self):
        uri = self.servers.start('inst-1', 64)
        self.servers.start('inst-2', 32)
        old = self._until_watched('inst-1')
        other = self._until_watched('inst-2')
        self._stop(old['pid'])
        self._after_timeout()
        self.assertEqual({}, self.servers.check())
        server = self.servers.list()['inst-1']
        self.assertFalse(memory_server._alive(old['pid']))
        self.assertNotEqual(old['pid'], server['pid'])
        self.assertEqual((1, 1), (server['hangs'], server['restarts']))
        self.assertEqual(uri, self.servers.start('inst-1', 64))
        self.assertTrue(self._listens(self.port_min))
        # The other server kept on; the new one is watched in its turn.
        self.assertEqual(other['pid'], self.servers.list()['inst-2']['pid'])
        self._until_watched('inst-1')
        self._stop(server['pid'])
        self._after_timeout()
        self.assertEqual({}, self.servers.check())
        self.assertEqual(2, self.servers.list()['inst-1']['hangs'])
        # As the exporter reads them.
        found = memory_server.read_servers(os.path.join(self.dir, 'state'))
        self.assertEqual((2, 2, 0), (found['inst-1']['hangs'],
                                     found['inst-1']['restarts'],
                                     found['inst-2']['hangs']))

    def test_a_server_hung_before_its_first_check_is_killed(self):
        # WATCHDOG=1 waits in the socket; the check reads it and the
        # silence after it.
        self.servers.start('inst-1', 64)
        time.sleep(TIMEOUT)
        pid = self.servers.list()['inst-1']['pid']
        self._stop(pid)
        self.assertEqual({}, self.servers.check())
        self._after_timeout()
        self.assertEqual({}, self.servers.check())
        self.assertEqual(1, self.servers.list()['inst-1'].get('hangs'))

    def test_a_silent_binary_is_never_killed(self):
        # One that does not speak the protocol (an older daemon).
        self.useFixture(fixtures.EnvironmentVariable(
            'MEMORY_SERVER_DOUBLE_SILENT', '1'))
        self.servers.start('inst-1', 64)
        pid = self.servers.list()['inst-1']['pid']
        self._stop(pid)
        self._after_timeout()
        self.assertEqual({}, self.servers.check())
        self.assertEqual(pid, self.servers.list()['inst-1']['pid'])
        self.assertNotIn('watchdog', self.servers.list()['inst-1'])

    def test_a_watchdog_that_waited_in_the_socket_counts_when_sent(self):
        # A WATCHDOG=1 sent right after a check, just before the server
        # hung, is read at the next check: it is as old as it was sent.
        self.servers.start('inst-1', 64)
        server = self._until_watched('inst-1')
        self._stop(server['pid'])
        self.servers._notify['inst-1'].close()
        read = time.monotonic() - TIMEOUT * 3
        self.servers._last_read['inst-1'] = read
        self.servers._last_ping['inst-1'] = read
        self.servers._notify['inst-1'] = FakeSocket([
            service_notify.Message(server['pid'], {'WATCHDOG': '1'},
                                   time.time() - TIMEOUT * 2)])
        self.assertEqual({}, self.servers.check())
        self.assertEqual(1, self.servers.list()['inst-1'].get('hangs'))

    def test_another_process_cannot_keep_a_hung_server_alive(self):
        self.servers.start('inst-1', 64)
        old = self._until_watched('inst-1')
        self._stop(old['pid'])
        path = os.path.join(self.dir, 'state', 'memory-server-inst-1.notify')
        deadline = time.monotonic() + TIMEOUT * 2
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            while time.monotonic() < deadline:
                s.sendto(b'WATCHDOG=1', path)
                time.sleep(TIMEOUT / 4)
        self.assertEqual({}, self.servers.check())
        self.assertEqual(1, self.servers.list()['inst-1']['hangs'])

    def test_after_a_nova_compute_restart(self):
        # The servers keep their NOTIFY_SOCKET path; the new process binds
        # it again and holds a server that spoke the protocol to it.
        self.servers.start('inst-1', 64)
        self.servers.start('inst-2', 32)
        self._until_watched('inst-1')
        self._until_watched('inst-2')
        again = self._servers()
        self.addCleanup(lambda: [again.stop(u) for u in again.list()])
        self._after_timeout()
        self.assertEqual({}, again.check())
        self.assertNotIn('hangs', again.list()['inst-1'])
        pid = again.list()['inst-1']['pid']
        self._stop(pid)
        self._after_timeout()
        self.assertEqual({}, again.check())
        self.assertEqual(1, again.list()['inst-1']['hangs'])
        self.assertNotIn('hangs', again.list()['inst-2'])
        self.servers = again

    def test_a_state_directory_too_long_for_the_sockets(self):
        long_dir = os.path.join(self.dir, 'x' * 80)
        err = self.assertRaises(
            memory_server.MemoryServerError, memory_server.MemoryServers,
            long_dir, self.binary, '127.0.0.1', self.port_min,
            self.port_max, watchdog_timeout=30)
        self.assertIn('memory_server_watchdog_timeout = 0', str(err))
        # Without the watchdog the directory is fine.
        memory_server.MemoryServers(long_dir, self.binary, '127.0.0.1',
                                    self.port_min, self.port_max)


class NotifySocketTest(base.MemoryServersBase):

    def test_parse(self):
        self.assertEqual({'READY': '1', 'STATUS': 'a=b'},
                         service_notify.parse(b'READY=1\nSTATUS=a=b\nX\n'))

    def test_receive_names_the_sender(self):
        path = os.path.join(self.dir, 'n.sock')
        sock = service_notify.NotifySocket(path)
        self.addCleanup(sock.close)
        self.assertEqual([], sock.receive())
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(b'READY=1', path)
            s.sendto(b'WATCHDOG=1', path)
        before = time.time()
        time.sleep(0.2)
        got = sock.receive()
        self.assertEqual([(os.getpid(), {'READY': '1'}),
                          (os.getpid(), {'WATCHDOG': '1'})],
                         [(m.pid, m.fields) for m in got])
        # When they were sent, not when they were read.
        for m in got:
            self.assertLess(m.sent, before + 0.1)
            self.assertGreater(m.sent, before - 60)
        # Bound anew over what was there.
        again = service_notify.NotifySocket(path)
        again.close()
        self.assertFalse(os.path.exists(path))

    def test_too_long_a_path(self):
        self.assertRaises(ValueError, service_notify.NotifySocket,
                          '/' + 'x' * service_notify.MAX_PATH_BYTES)
