# SPDX-License-Identifier: Apache-2.0
"""lab/lib/rabbitmq.sh: it stops only what it started, refuses misuse.

Starting a real broker is covered by nova_driver's test_rabbitmq.py.
"""

import os
import signal
import subprocess

from puma_lab import paths

LIB = os.path.join(paths.TOP, 'lab', 'lib')


def sh(script):
    full = '. %s/common.sh; . %s/rabbitmq.sh; %s' % (LIB, LIB, script)
    return subprocess.run(['bash', '-c', full], capture_output=True,
                          text=True)


def test_stop_leaves_a_reused_pid_alone(tmp_path):
    # A PID file pointing at a process that is not a broker any more.
    other = subprocess.Popen(['sleep', '60'])
    try:
        for name in ('rabbitmq.pid', 'beam.pid', 'epmd.pid'):
            (tmp_path / name).write_text('%d\n' % other.pid)
        assert sh('stop_rabbitmq %s' % tmp_path).returncode == 0
        assert other.poll() is None
        assert not (tmp_path / 'rabbitmq.pid').exists()
    finally:
        other.send_signal(signal.SIGTERM)
        other.wait()


def test_stop_without_a_broker_is_a_no_op(tmp_path):
    assert sh('stop_rabbitmq %s' % tmp_path).returncode == 0


def test_start_refuses_a_busy_directory_and_bad_usage(tmp_path):
    (tmp_path / 'rabbitmq.pid').write_text('1\n')
    p = sh('start_rabbitmq %s 35999' % tmp_path)
    assert p.returncode == 1
    assert 'a broker already runs in %s' % tmp_path in p.stderr
    p = sh('start_rabbitmq')
    assert p.returncode == 1 and 'usage: start_rabbitmq DIR PORT' in p.stderr
