# SPDX-License-Identifier: Apache-2.0
"""The lab's daemons: ready, exited before ready, ended, lingering."""

import pytest

from puma_lab import daemon
from puma_lab import errors


def sh(tmp_path, script):
    d = daemon.Daemon('d', str(tmp_path / 'd.log'))
    return d.spawn(['sh', '-c', script])


def test_ready_on_a_line_then_ended_by_sigterm(tmp_path):
    d = sh(tmp_path, 'echo serving; exec sleep 60')
    assert d.wait_ready(lambda: 'serving' in d.output(), 'serving') is d
    assert d.alive()
    assert d.terminate() == -15
    assert not d.alive()
    # Ending it again says how it ended.
    assert d.terminate() == -15


def test_exit_before_ready_says_how_and_shows_its_output(tmp_path):
    d = sh(tmp_path, 'echo bad option >&2; exit 2')
    with pytest.raises(errors.LabError,
                       match='d exited with 2 before serving: bad option'):
        d.wait_ready(lambda: False, 'serving')


def test_not_ready_in_time(tmp_path):
    d = sh(tmp_path, 'exec sleep 60')
    try:
        with pytest.raises(errors.LabError, match='d: not serving within 0s'):
            d.wait_ready(lambda: False, 'serving', timeout=0)
    finally:
        d.kill()
    assert not d.alive()


def test_a_daemon_that_ignores_sigterm_is_killed(tmp_path):
    d = sh(tmp_path, "trap '' TERM; echo up; while :; do sleep 0.1; done")
    d.wait_ready(lambda: 'up' in d.output(), 'up')
    with pytest.raises(daemon.Lingered, match='ignored SIGTERM for 1s'):
        d.terminate(timeout=1)
    assert not d.alive()


def test_appended_log_names_each_command(tmp_path):
    d = daemon.Daemon('d', str(tmp_path / 'd.log'))
    d.spawn(['echo', 'one'], append=True).proc.wait()
    d.spawn(['echo', 'two'], append=True).proc.wait()
    assert d.output() == '+ echo one\none\n+ echo two\ntwo\n'


def test_never_started(tmp_path):
    d = daemon.Daemon('d', str(tmp_path / 'd.log'))
    assert not d.alive()
    assert d.terminate() is None
    assert d.output() == ''
    d.kill()
