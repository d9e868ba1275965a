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

import json
import os
import signal
import socket
import sys
import time

import fixtures
import testtools

from puma_nova.compute import memory_server
from puma_nova.tests import memory_server_double


def _free_port_range(n=4):
    # Ports the kernel hands out are free now; tests use a small range
    # above one of them.
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    return port, port + n - 1


class MemoryServersBase(testtools.TestCase):
    """Runs the memory server test double as a real child process."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.binary = os.path.join(self.dir, 'qemu-memory-server')
        with open(self.binary, 'w') as f:
            f.write('#!%s\nimport sys\nsys.path[:0] = %r\n'
                    'from puma_nova.tests import memory_server_double\n'
                    'sys.exit(memory_server_double.main())\n'
                    % (sys.executable, sys.path))
        os.chmod(self.binary, 0o755)
        self.port_min, self.port_max = _free_port_range()
        self.servers = self._servers()
        self.addCleanup(self._stop_all)

    watchdog_timeout = 0

    def _servers(self, binary=None, tls_x509_dir=None, client_dn=None):
        return memory_server.MemoryServers(
            os.path.join(self.dir, 'state'), binary or self.binary,
            '127.0.0.1', self.port_min, self.port_max,
            tls_x509_dir=tls_x509_dir, client_dn=client_dn,
            watchdog_timeout=self.watchdog_timeout)

    def _stop_all(self):
        for uuid in list(self.servers.list()):
            self.servers.stop(uuid)

    def _kill(self, uuid, servers=None):
        pid = (servers or self.servers).list()[uuid]['pid']
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            if not memory_server._alive(pid):
                return pid
            time.sleep(0.05)
        self.fail('pid %d still alive' % pid)

    def _listens(self, port):
        with socket.create_connection(('127.0.0.1', port), timeout=5):
            return True

    def _log(self, uuid):
        # The double prints its line just after it listens.
        path = os.path.join(self.dir, 'state', 'memory-server-%s.log' % uuid)
        for _ in range(100):
            with open(path) as f:
                out = f.read()
            if out:
                return out
            time.sleep(0.05)
        return out


class MemoryServersTest(MemoryServersBase):

    def test_start_is_idempotent_and_stop(self):
        uri = self.servers.start('inst-1', 1024)
        self.assertEqual('tcp:127.0.0.1:%d' % self.port_min, uri)
        self.assertEqual(uri, self.servers.start('inst-1', 1024))
        pid = self.servers.list()['inst-1']['pid']
        with socket.create_connection(('127.0.0.1', self.port_min)):
            pass
        second = self.servers.start('inst-2', 512)
        self.assertNotEqual(uri, second)
        self.assertEqual(1536, self.servers.served_mb())
        self.assertTrue(self.servers.stop('inst-1'))
        self.assertFalse(memory_server._alive(pid))
        self.assertFalse(self.servers.stop('inst-1'))
        self.assertEqual(['inst-2'], list(self.servers.list()))

    def test_size_conflict(self):
        self.servers.start('inst-1', 1024)
        self.assertRaises(memory_server.MemoryServerError,
                          self.servers.start, 'inst-1', 2048)

    def test_bad_size(self):
        for size in (0, -1, '1024', None):
            self.assertRaises(memory_server.MemoryServerError,
                              self.servers.start, 'inst-1', size)

    def test_state_survives_restart(self):
        uri = self.servers.start('inst-1', 1024)
        again = self._servers()
        self.assertEqual(uri, again.start('inst-1', 1024))
        self.assertTrue(again.stop('inst-1'))
        self.assertEqual({}, self._servers().list())

    def test_reused_pid_is_left_alone(self):
        # A state file naming a pid (this test process) that runs
        # something else: never signalled; the record stays for check().
        self.useFixture(fixtures.MonkeyPatch(
            'puma_nova.compute.memory_server._cmdline',
            lambda pid: ['sleep', '100']))
        kills = []
        self.useFixture(fixtures.MonkeyPatch(
            'os.kill', lambda pid, sig: kills.append((pid, sig))))
        state = os.path.join(self.dir, 'state', memory_server.STATE_FILE)
        os.makedirs(os.path.dirname(state), exist_ok=True)
        with open(state, 'w') as f:
            json.dump({'inst-1': {'pid': os.getpid(),
                                  'port': self.port_min,
                                  'size_mb': 64}}, f)
        servers = self._servers()
        self.assertEqual(['inst-1'], list(servers.list()))
        self.assertTrue(servers.stop('inst-1'))
        self.assertEqual([], [k for k in kills if k[1] != 0])
        self.assertEqual({}, servers.list())

    # Supervision (check) ---------------------------------------------

    def test_check_leaves_running_servers_alone(self):
        self.servers.start('inst-1', 64)
        before = self.servers.list()
        self.assertEqual({}, self.servers.check())
        self.assertEqual(before, self.servers.list())
        self.assertNotIn('restarts', before['inst-1'])

    def test_plain_server_is_insecure_and_serves_one_instance(self):
        # Without TLS the server must be told it runs open (it refuses
        # to start otherwise), and it serves this instance alone.
        self.servers.start('inst-1', 64)
        self.assertIn('memory server double serves vm inst-1, insecure\n',
                      self._log('inst-1'))

    def test_check_starts_a_killed_server_again_on_its_port(self):
        uri = self.servers.start('inst-1', 64)
        self.servers.start('inst-2', 32)
        other = self.servers.list()['inst-2']
        old = self._kill('inst-1')
        self.assertEqual({}, self.servers.check())
        server = self.servers.list()['inst-1']
        self.assertNotEqual(old, server['pid'])
        self.assertTrue(memory_server._alive(server['pid']))
        self.assertEqual((self.port_min, 64, 1),
                         (server['port'], server['size_mb'],
                          server['restarts']))
        self.assertTrue(self._listens(self.port_min))
        # Same URI for the instance's main host; the other server kept.
        self.assertEqual(uri, self.servers.start('inst-1', 64))
        self.assertEqual(other, self.servers.list()['inst-2'])
        # Recorded: a restarted nova-compute knows the new pid.
        self.assertEqual(server, self._servers().list()['inst-1'])
        self.assertEqual(2, self._log('inst-1').count('double on'))
        # Killed again: started again, counted.
        self._kill('inst-1')
        self.assertEqual({}, self.servers.check())
        self.assertEqual(2, self.servers.list()['inst-1']['restarts'])

    def test_check_after_nova_compute_restart(self):
        # Servers that died while nova-compute was down (or with the
        # host) are not forgotten: the new nova-compute starts them.
        self.servers.start('inst-1', 64)
        old = self._kill('inst-1')
        again = self._servers()
        self.assertEqual(old, again.list()['inst-1']['pid'])
        self.assertEqual({}, again.check())
        self.assertNotEqual(old, again.list()['inst-1']['pid'])
        self.assertTrue(self._listens(self.port_min))
        self.assertTrue(again.stop('inst-1'))
        self.assertEqual({}, self.servers.check())

    def test_check_reports_a_taken_port_and_tries_again(self):
        self.servers.start('inst-1', 64)
        self._kill('inst-1')
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(('127.0.0.1', self.port_min))
        squatter.listen(1)
        failed = self.servers.check()
        squatter.close()
        self.assertEqual(['inst-1'], list(failed))
        self.assertIn('port 127.0.0.1:%d is taken by another process'
                      % self.port_min, failed['inst-1'])
        self.assertEqual({}, self.servers.check())
        self.assertEqual(1, self.servers.list()['inst-1']['restarts'])
        self.assertTrue(self._listens(self.port_min))

    def test_check_keeps_tls_and_the_admitted_clients(self):
        certs = os.path.join(self.dir, 'pki')
        os.mkdir(certs)
        self._stop_all()
        self.servers = self._servers(tls_x509_dir=certs,
                                     client_dn='CN={host}')
        self.servers.start('inst-1', 64, ['src', 'dst'])
        authz = self._authz('inst-1')
        self._kill('inst-1')
        self.assertEqual({}, self.servers.check())
        log = [line for line in self._log('inst-1').splitlines()
               if 'double on' in line]
        self.assertEqual(2, len(log))
        self.assertIn('TLS tls0 authz auth0 with tls-creds-x509,', log[1])
        self.assertEqual(log[0], log[1])
        self.assertEqual(authz, self._authz('inst-1'))
        self.assertEqual(['dst', 'src'],
                         self.servers.list()['inst-1']['clients'])

    def test_read_servers_as_the_exporter_does(self):
        state = os.path.join(self.dir, 'state')
        self.assertEqual({}, memory_server.read_servers(
            os.path.join(self.dir, 'none')))
        self.servers.start('inst-1', 64)
        self.servers.start('inst-2', 32)
        self._kill('inst-2')
        found = memory_server.read_servers(state)
        self.assertTrue(found['inst-1']['up'])
        self.assertGreater(found['inst-1']['resident_bytes'], 0)
        self.assertEqual((self.port_min, 64, False, 0),
                         tuple(found['inst-1'][k] for k in
                               ('port', 'size_mb', 'tls', 'restarts')))
        self.assertEqual((False, 0), (found['inst-2']['up'],
                                      found['inst-2']['resident_bytes']))
        self.servers.check()
        found = memory_server.read_servers(state)
        self.assertEqual((True, 1), (found['inst-2']['up'],
                                     found['inst-2']['restarts']))

    def test_check_refuses_tls_the_host_no_longer_has(self):
        certs = os.path.join(self.dir, 'pki')
        os.mkdir(certs)
        self._stop_all()
        self.servers = self._servers(tls_x509_dir=certs)
        self.servers.start('inst-1', 64)
        self._kill('inst-1')
        plain = self._servers()
        failed = plain.check()
        self.assertIn('configured without it', failed['inst-1'])

    def test_unreadable_state_is_kept(self):
        state = os.path.join(self.dir, 'state', memory_server.STATE_FILE)
        os.makedirs(os.path.dirname(state), exist_ok=True)
        with open(state, 'w') as f:
            f.write('{not json')
        self.assertEqual({}, self._servers().list())
        with open(state + '.broken') as f:
            self.assertEqual('{not json', f.read())

    def test_daemon_fails(self):
        failing = os.path.join(self.dir, 'failing')
        with open(failing, 'w') as f:
            f.write('#!/bin/sh\necho "cannot map memory" >&2\nexit 3\n')
        os.chmod(failing, 0o755)
        servers = self._servers(failing)
        ex = self.assertRaises(memory_server.MemoryServerError,
                               servers.start, 'inst-1', 64)
        self.assertIn('cannot map memory', str(ex))
        self.assertEqual({}, servers.list())

    def test_missing_binary(self):
        servers = self._servers(os.path.join(self.dir, 'nope'))
        self.assertRaises(memory_server.MemoryServerError,
                          servers.start, 'inst-1', 64)

    def test_state_file_content(self):
        self.servers.start('inst-1', 64)
        with open(os.path.join(self.dir, 'state',
                               memory_server.STATE_FILE)) as f:
            state = json.load(f)
        self.assertEqual({'pid', 'port', 'size_mb', 'tls'},
                         set(state['inst-1']))
        self.assertFalse(state['inst-1']['tls'])

    def test_tls(self):
        certs = os.path.join(self.dir, 'pki')
        os.mkdir(certs)
        self._stop_all()
        self.servers = self._servers(tls_x509_dir=certs)
        self.servers.start('inst-1', 64)
        self.assertIn('TLS tls0 authz None with tls-creds-x509,id=tls0,'
                      'endpoint=server,verify-peer=on,dir=%s' % certs,
                      self._log('inst-1'))
        # One instance per server, and TLS: not insecure.
        self.assertIn('memory server double serves vm inst-1\n',
                      self._log('inst-1'))
        self.assertTrue(self.servers.list()['inst-1']['tls'])
        self.assertNotIn('clients', self.servers.list()['inst-1'])

    def _authz(self, uuid):
        with open(os.path.join(self.dir, 'state',
                               'memory-server-%s.authz.json' % uuid)) as f:
            return json.load(f)

    def test_tls_admits_the_split_hosts_only(self):
        certs = os.path.join(self.dir, 'pki')
        os.mkdir(certs)
        self._stop_all()
        self.servers = self._servers(tls_x509_dir=certs,
                                     client_dn='O=Lab,CN={host}.example')
        self.servers.start('inst-1', 64, ['src', 'dst'])
        authz = os.path.join(self.dir, 'state',
                             'memory-server-inst-1.authz.json')
        self.assertIn('TLS tls0 authz auth0 with tls-creds-x509,',
                      self._log('inst-1'))
        self.assertIn('authz-listfile,id=auth0,filename=%s,refresh=on'
                      % authz, self._log('inst-1'))
        self.assertEqual(
            {'policy': 'deny', 'rules': [
                {'match': 'O=Lab,CN=dst.example', 'policy': 'allow',
                 'format': 'exact'},
                {'match': 'O=Lab,CN=src.example', 'policy': 'allow',
                 'format': 'exact'}]}, self._authz('inst-1'))
        self.assertEqual(['dst', 'src'],
                         self.servers.list()['inst-1']['clients'])
        # A later migration's destination is admitted as well, by the
        # running server (it reloads the file).
        pid = self.servers.list()['inst-1']['pid']
        self.servers.start('inst-1', 64, ['dst', 'next'])
        self.assertEqual(pid, self.servers.list()['inst-1']['pid'])
        self.assertEqual(['dst', 'next', 'src'],
                         [r['match'].split('CN=')[1].split('.')[0]
                          for r in self._authz('inst-1')['rules']])
        # And a restarted nova-compute knows the list.
        self.assertEqual(['dst', 'next', 'src'],
                         self._servers(tls_x509_dir=certs).list()[
                             'inst-1']['clients'])
        self.assertTrue(self.servers.stop('inst-1'))
        self.assertFalse(os.path.exists(authz))

    def test_bad_client_dn_and_failed_start_leave_nothing(self):
        certs = os.path.join(self.dir, 'pki')
        os.mkdir(certs)
        authz = os.path.join(self.dir, 'state',
                             'memory-server-inst-1.authz.json')
        for dn in ('CN={hostname}', 'CN={0}', 'CN={host'):
            servers = self._servers(tls_x509_dir=certs, client_dn=dn)
            ex = self.assertRaises(memory_server.MemoryServerError,
                                   servers.start, 'inst-1', 64, ['a'])
            self.assertIn('memory_server_client_dn', str(ex))
            self.assertEqual({}, servers.list())
            self.assertFalse(os.path.exists(authz))
        failing = os.path.join(self.dir, 'failing')
        with open(failing, 'w') as f:
            f.write('#!/bin/sh\nexit 3\n')
        os.chmod(failing, 0o755)
        servers = self._servers(failing, tls_x509_dir=certs,
                                client_dn='CN={host}')
        self.assertRaises(memory_server.MemoryServerError,
                          servers.start, 'inst-1', 64, ['a'])
        self.assertEqual({}, servers.list())
        self.assertFalse(os.path.exists(authz))

    def test_no_client_list_without_tls(self):
        servers = self._servers(client_dn='CN={host}')
        servers.start('inst-1', 64, ['src', 'dst'])
        self.assertNotIn('authz', self._log('inst-1'))
        self.assertFalse(os.path.exists(os.path.join(
            self.dir, 'state', 'memory-server-inst-1.authz.json')))
        servers.stop('inst-1')

    def test_plain_has_no_tls(self):
        self.servers.start('inst-1', 64)
        self.assertNotIn('TLS', self._log('inst-1'))

    def test_tls_setting_changed_under_a_running_server(self):
        # A server started in the clear is not handed out once the host
        # asks for TLS (QEMU's TLS handshake with it would fail later).
        self.servers.start('inst-1', 64)
        certs = os.path.join(self.dir, 'pki')
        os.mkdir(certs)
        ex = self.assertRaises(memory_server.MemoryServerError,
                               self._servers(tls_x509_dir=certs).start,
                               'inst-1', 64)
        self.assertIn('runs without TLS', str(ex))

    def test_bad_tls_dir(self):
        os.mkdir(self.dir + ',x')
        for bad in (os.path.join(self.dir, 'missing'), self.dir + ',x'):
            servers = self._servers(tls_x509_dir=bad)
            ex = self.assertRaises(memory_server.MemoryServerError,
                                   servers.start, 'inst-1', 64)
            self.assertIn('TLS directory', str(ex))
            self.assertEqual({}, servers.list())

    def test_double_parses_like_the_daemon(self):
        self.assertEqual(1, memory_server_double.main(
            ['--listen', '127.0.0.1:1', '--max-memory', '1M', '--fail']))
