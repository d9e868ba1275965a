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
"""A private MariaDB server for tests (lab/lib/mariadb.sh).

One server per test process, started on first use on a free loopback
port with its data under /run/puma-lab and stopped by PID when the
process exits; each test gets a database of its own, dropped after it.
A test process that ended without its exit handlers (killed, or
``os._exit``) leaves its server running: the next process that starts
one stops the servers of processes that are gone.
Tests using it skip with AVAILABLE's reason when Debian's mariadb-server
or PyMySQL is missing (lab/setup deps installs the server without
starting Debian's service).
"""

import atexit
import itertools
import os
import socket
import subprocess
import threading

import fixtures

from puma_nova.tests import rabbitmq

MARIADBD = '/usr/sbin/mariadbd'
LIB = os.path.join(rabbitmq.TOP, 'lab', 'lib')
PASSWORD = 'puma-test'

try:
    import pymysql  # noqa: F401
    _PYMYSQL = True
except ImportError:
    _PYMYSQL = False

AVAILABLE = (os.path.exists(MARIADBD) and _PYMYSQL,
             'mariadb-server (lab/setup deps) or PyMySQL is not installed')

_LOCK = threading.Lock()
_SERVER = {}
_COUNT = itertools.count(1)


def _sh(script, timeout=120):
    p = subprocess.run(['bash', '-c', '. %s/common.sh; . %s/mariadb.sh; %s'
                        % (LIB, LIB, script)], capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode:
        raise RuntimeError('%s: %s' % (script, (p.stderr or p.stdout)[-2000:]))
    return p.stdout


def _stop(path):
    _sh('stop_mariadb %s' % path)
    subprocess.run(['rm', '-rf', path])


def _creator_gone(name):
    """Whether the test process that made server NAME has ended."""
    parts = name.split('-')
    if len(parts) != 3 or parts[0] != 'mdb' or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _stop_orphans():
    for name in os.listdir(rabbitmq.RUN) if os.path.isdir(rabbitmq.RUN) \
            else ():
        if _creator_gone(name):
            try:
                _stop(os.path.join(rabbitmq.RUN, name))
            except (RuntimeError, subprocess.SubprocessError):
                pass  # another process is stopping it


def server():
    """(data directory, port) of this process's server, started once."""
    with _LOCK:
        if not _SERVER:
            _stop_orphans()
            with socket.socket() as s:
                s.bind(('127.0.0.1', 0))
                port = s.getsockname()[1]
            path = os.path.join(rabbitmq.RUN,
                                'mdb-%d-%d' % (os.getpid(), port))
            _sh('start_mariadb %s %d' % (path, port), timeout=180)
            atexit.register(_stop, path)
            _SERVER.update(path=path, port=port)
        return _SERVER['path'], _SERVER['port']


class MariaDBFixture(fixtures.Fixture):
    """A new, empty database; .url is its oslo.db connection URL."""

    def _setUp(self):
        path, port = server()
        name = 'puma_%d_%d' % (os.getpid(), next(_COUNT))
        _sh('mariadb_create_db %s %s puma %s' % (path, name, PASSWORD))
        self.addCleanup(_sh, "mariadb_sql %s 'DROP DATABASE `%s`'"
                        % (path, name))
        self.url = ('mysql+pymysql://puma:%s@127.0.0.1:%d/%s'
                    '?charset=utf8mb4' % (PASSWORD, port, name))
