# SPDX-License-Identifier: Apache-2.0
"""A memory server out of step: lab/inject/msreplay.py in front of one.

:class:`ReplayingServer` runs the relay in the real server's host,
listening on its own port: a destination given its :attr:`uri` pages
through it from the real server, and once, after some GETs, gets the
reply to an older GET in place of the one it asked for (see the
script's docstring), counting GETs from :meth:`arm` on.  The split test
that uses it checks that QEMU refuses that reply rather than copy the
older pages into the guest.
"""

import os
import re
import signal
import sys

from puma_lab import daemon
from puma_lab import paths

SCRIPT = os.path.join(paths.TOP, 'lab', 'inject', 'msreplay.py')


class ReplayingServer(daemon.Daemon):
    """The relay on SERVER's host, port PORT, in front of SERVER."""

    def __init__(self, server, port=7900, after=20):
        self.server = server
        self.host = server.host
        self.port = port
        self.after = after
        super().__init__('msreplay-%s-%d' % (self.host.name, port),
                         self.host.lab.path('msreplay-%d.log' % port))

    @property
    def uri(self):
        return 'tcp:%s:%d' % (self.host.addr, self.port)

    def start(self):
        self.spawn(['ip', 'netns', 'exec', self.host.ns, sys.executable,
                    SCRIPT, '--listen', '%s:%d' % (self.host.addr, self.port),
                    '--to', '%s:%d' % (self.host.addr, self.server.port),
                    '--after', str(self.after), '--armed-by', 'SIGUSR1'])
        self.host.lab.register(self, 'guest')
        return self.wait_ready(lambda: 'msreplay: listening' in self.output(),
                               'listening')

    def arm(self):
        """Count GETs from now on: the replay follows AFTER of them."""
        self.proc.send_signal(signal.SIGUSR1)
        self.wait_ready(lambda: 'msreplay: armed' in self.output(), 'armed')

    def replayed(self):
        """The log line of the replay, or None before it."""
        m = re.search(r'^msreplay: connection \d+: answered GET .*$',
                      self.output(), re.M)
        return m and m.group(0)

    def stop(self, timeout=15):
        return self.terminate(timeout)
