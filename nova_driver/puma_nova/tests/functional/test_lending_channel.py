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

"""The lending-channel filter in a real kernel bridge.

Builds, in network namespaces of its own, a bridge with the lending
interfaces of three "instances" (veth pairs named as the driver names
them), programs the ruleset of LendingChannel with nft, and connects
over TCP between the namespaces. Needs root, ip and nft; skipped
otherwise.
"""

import os
import shutil
import subprocess
import sys
import time
import uuid

import testtools

from puma_nova.compute import lending

PORT = 7777
LISTENER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', %d))
s.listen(16)
while True:
    s.accept()[0].close()
""" % PORT
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], %d), timeout=2).close()
except OSError:
    sys.exit(1)
""" % PORT

VMS = {
    'a': ('aaaaaaaa-0000-4000-8000-000000000001', '10.77.0.1'),
    'b': ('bbbbbbbb-0000-4000-8000-000000000002', '10.77.0.2'),
    'c': ('cccccccc-0000-4000-8000-000000000003', '10.77.0.3'),
}


def _run(*cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, check=check,
                          timeout=30)


@testtools.skipUnless(os.geteuid() == 0 and shutil.which('nft') and
                      shutil.which('ip'), 'needs root, ip and nft')
class LendingChannelNetnsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        tag = uuid.uuid4().hex[:6]
        self.host_ns = 'pnc%s-host' % tag
        self._netns(self.host_ns)
        self._ip(self.host_ns, 'link', 'add', 'br-puma', 'type', 'bridge')
        self._ip(self.host_ns, 'link', 'set', 'br-puma', 'up')
        self.vm_ns = {}
        for name, (vm_uuid, address) in VMS.items():
            ns = 'pnc%s-%s' % (tag, name)
            self._netns(ns)
            self.vm_ns[name] = ns
            tap = lending.tap_name(vm_uuid)
            self._ip(self.host_ns, 'link', 'add', tap, 'type', 'veth',
                     'peer', 'name', 'eth0', 'netns', ns)
            self._ip(self.host_ns, 'link', 'set', tap, 'master', 'br-puma',
                     'up')
            self._ip(ns, 'addr', 'add', address + '/24', 'dev', 'eth0')
            self._ip(ns, 'link', 'set', 'eth0', 'up')
            listener = subprocess.Popen(
                ['ip', 'netns', 'exec', ns, sys.executable, '-c', LISTENER],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.addCleanup(listener.wait)
            self.addCleanup(listener.kill)
        for ns in self.vm_ns.values():
            self._wait_listening(ns)
        self.channel = lending.LendingChannel(
            'br-puma', 'puma_lending', enabled=True, execute=self._nft)

    def _wait_listening(self, ns, timeout=60):
        """Wait until the listener of @ns accepts connections.

        Python starts in a fraction of a second on an idle machine but
        much later on a loaded one: a test must not read "not reached"
        into a listener that is not up yet.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            res = _run('ip', 'netns', 'exec', ns, 'ss', '-Hltn',
                       'sport = :%d' % PORT, check=False)
            if res.stdout.strip():
                return
            time.sleep(0.1)
        self.fail('no listener on port %d in %s after %ds'
                  % (PORT, ns, timeout))

    def _netns(self, ns):
        _run('ip', 'netns', 'add', ns)
        self.addCleanup(_run, 'ip', 'netns', 'del', ns, check=False)

    def _ip(self, ns, *args):
        _run('ip', '-n', ns, *args)

    def _nft(self, *cmd, process_input=None):
        subprocess.run(('ip', 'netns', 'exec', self.host_ns) + cmd,
                       input=process_input, text=True, check=True,
                       capture_output=True, timeout=30)

    def _reaches(self, src, dst):
        res = _run('ip', 'netns', 'exec', self.vm_ns[src], sys.executable,
                   '-c', CONNECT, VMS[dst][1], check=False)
        return res.returncode == 0

    def _pair(self, borrower, lender):
        return {'borrower': VMS[borrower][0], 'lender': VMS[lender][0],
                'borrower_address': VMS[borrower][1],
                'lender_address': VMS[lender][1], 'capacity_mb': 256,
                'key': 'k'}

    def test_only_pairs_talk(self):
        # Without the filter the bridge lets everyone talk.
        self.assertTrue(self._wait_reaches('a', 'c'))
        self.assertTrue(self._wait_reaches('a', 'b'))
        self.channel.apply([self._pair('a', 'b')])
        self.assertTrue(self._reaches('a', 'b'))
        self.assertTrue(self._reaches('b', 'a'))
        self.assertFalse(self._reaches('a', 'c'))
        self.assertFalse(self._reaches('c', 'b'))
        # A new assignment replaces the old one.
        self.channel.apply([self._pair('c', 'b')])
        self.assertTrue(self._reaches('c', 'b'))
        self.assertFalse(self._reaches('a', 'b'))
        self.channel.apply([])
        self.assertFalse(self._reaches('c', 'b'))

    def _wait_reaches(self, src, dst, tries=20):
        for _ in range(tries):
            if self._reaches(src, dst):
                return True
        return False

    def test_spoofed_source_dropped(self):
        self.assertTrue(self._wait_reaches('c', 'b'))
        self.channel.apply([self._pair('a', 'b')])
        # c takes a's address: its frames still leave c's interface.
        self._ip(self.vm_ns['c'], 'addr', 'flush', 'dev', 'eth0')
        self._ip(self.vm_ns['c'], 'addr', 'add', VMS['a'][1] + '/24',
                 'dev', 'eth0')
        self.assertFalse(self._reaches('c', 'b'))
        self.assertTrue(self._reaches('a', 'b'))
