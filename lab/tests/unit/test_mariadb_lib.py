# SPDX-License-Identifier: Apache-2.0
"""lab/lib/mariadb.sh: it stops only what it started, refuses misuse.

Starting a real server is covered by lab/tests/cloud/test_cloud.py.
"""

import os
import signal
import subprocess

from puma_lab import paths

LIB = os.path.join(paths.TOP, 'lab', 'lib')


def sh(script):
    full = '. %s/common.sh; . %s/mariadb.sh; %s' % (LIB, LIB, script)
    return subprocess.run(['bash', '-c', full], capture_output=True,
                          text=True)


def test_stop_leaves_a_reused_pid_alone(tmp_path):
    other = subprocess.Popen(['sleep', '60'])
    try:
        (tmp_path / 'mariadb.pid').write_text('%d\n' % other.pid)
        assert sh('stop_mariadb %s' % tmp_path).returncode == 0
        assert other.poll() is None
        assert not (tmp_path / 'mariadb.pid').exists()
    finally:
        other.send_signal(signal.SIGTERM)
        other.wait()


def test_stop_without_a_server_is_a_no_op(tmp_path):
    assert sh('stop_mariadb %s' % tmp_path).returncode == 0


def test_start_refuses_a_busy_directory_and_bad_usage(tmp_path):
    (tmp_path / 'mariadb.pid').write_text('1\n')
    p = sh('start_mariadb %s 33999' % tmp_path)
    assert p.returncode == 1
    assert 'a MariaDB server already runs in %s' % tmp_path in p.stderr
    p = sh('start_mariadb')
    assert p.returncode == 1 and 'usage: start_mariadb DIR PORT' in p.stderr
