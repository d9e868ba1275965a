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
"""A private RabbitMQ broker for tests (lab/rabbitmq, lab/lib/rabbitmq.sh).

The broker listens on loopback only, on its own ports, with its own node
name and directories under /run/puma-lab, and is stopped by PID.  Tests
using it skip with AVAILABLE's reason when Debian's rabbitmq-server is
not installed (lab/setup deps installs it without starting the system
broker).
"""

import os
import socket
import subprocess

import fixtures

RABBITMQ_SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'
TOP = os.environ.get('PUMA_TOP') or os.path.abspath(os.path.join(
    os.path.dirname(__file__), '..', '..', '..'))
LAB_RABBITMQ = os.path.join(TOP, 'lab', 'rabbitmq')
RUN = os.environ.get('PUMA_RUN', '/run/puma-lab')


def free_port_block(n=3):
    """A port P with P..P+N-1 free on loopback (AMQP, dist, epmd)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if port + n > 65535:
            continue
        ok = True
        for p in range(port, port + n):
            with socket.socket() as s:
                try:
                    s.bind(('127.0.0.1', p))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError('no block of %d free loopback ports' % n)


class RabbitMQFixture(fixtures.Fixture):
    """A private broker from lab/rabbitmq; .url is its transport URL."""

    def _setUp(self):
        self.port = free_port_block()
        self.dir = os.path.join(RUN, 'rmq-%d-%d' % (os.getpid(), self.port))
        self.addCleanup(subprocess.run, ['rm', '-rf', self.dir])
        self.addCleanup(subprocess.run, [LAB_RABBITMQ, 'stop', self.dir],
                        timeout=120)
        out = subprocess.run([LAB_RABBITMQ, 'start', self.dir,
                              str(self.port)], capture_output=True,
                             text=True, timeout=300)
        if out.returncode:
            raise RuntimeError('lab/rabbitmq start failed: %s' % out.stderr)
        self.url = out.stdout.strip().splitlines()[-1]


AVAILABLE = (os.path.exists(RABBITMQ_SERVER),
             'rabbitmq-server is not installed (lab/setup deps)')
