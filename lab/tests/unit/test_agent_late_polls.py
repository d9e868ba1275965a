# SPDX-License-Identifier: Apache-2.0
"""A guest whose agent answers a status poll late still gives its result."""

import base64

import pytest

from puma_lab import agent
from puma_lab import errors
from puma_lab import kernel_host


class Transport:
    """guest-exec answers pid 7; status polls follow SCRIPT.

    Each entry is 'late' (the poll times out), 'running', 'done' or
    'gone' (the agent no longer knows the pid).
    """

    def __init__(self, script):
        self.script = list(script)
        self.polls = 0

    def __call__(self, cmd, timeout):
        if cmd['execute'] == 'guest-exec':
            return {'return': {'pid': 7}}
        self.polls += 1
        step = self.script.pop(0) if self.script else 'late'
        if step == 'late':
            raise TimeoutError('timed out')
        if step == 'gone':
            return {'error': {'desc': "Invalid parameter 'pid'"}}
        if step == 'running':
            return {'return': {'exited': False}}
        return {'return': {'exited': True, 'exitcode': 0,
                           'out-data': base64.b64encode(b'ok').decode()}}


def test_late_polls_are_asked_again():
    t = Transport(['late', 'running', 'late', 'done'])
    res = agent.GuestAgent(t, 'l2').run('true', timeout=30)
    assert (res.rc, res.out) == (0, 'ok')
    assert t.polls == 4


def test_a_command_that_never_ends_fails_at_the_deadline():
    t = Transport(['late'] + ['running'] * 10 ** 6)
    ga = agent.GuestAgent(t, 'l2')
    with pytest.raises(errors.LabError,
                       match=r'still running after 1s \(1 polls unan'):
        ga.run('true', timeout=1)
    assert t.polls > 2


def test_an_agent_that_stopped_answering_fails_after_some_polls():
    t = Transport(['late', 'running'] + ['late'] * 10)
    ga = agent.GuestAgent(t, 'l2')
    with pytest.raises(agent.AgentTimeout, match='did not answer'):
        ga.run('true', timeout=600)
    assert t.polls == 2 + agent.LATE_POLLS_IN_A_ROW


def test_a_result_lost_with_a_late_answer_is_named():
    ga = agent.GuestAgent(Transport(['late', 'gone']), 'l2')
    with pytest.raises(errors.LabError,
                       match='the last may have taken the result'):
        ga.run('true', timeout=30)


def test_an_unknown_pid_without_late_polls_is_plain():
    ga = agent.GuestAgent(Transport(['gone']), 'l2')
    with pytest.raises(errors.LabError, match="Invalid parameter 'pid'") \
            as e:
        ga.run('true', timeout=30)
    assert 'taken the result' not in str(e.value)


def test_a_timeout_is_its_own_error():
    ga = agent.GuestAgent(Transport(['late']), 'l2')
    with pytest.raises(agent.AgentTimeout, match='did not answer in 10s'):
        ga.status(7)


class RelayHost:
    name = 'kh'

    def __init__(self, rc):
        self.rc = rc

    def chroot(self, command, timeout, check):
        return agent.ExecResult(self.rc, '', 'Traceback ...')


def test_the_relay_tells_a_timeout_from_a_failure():
    late = kernel_host.NestedTransport(RelayHost(
        kernel_host.RELAY_TIMED_OUT), '/run/l2.qga')
    with pytest.raises(TimeoutError, match='relay in kh: no answer in 5s'):
        late({'execute': 'guest-ping'}, 5)
    broken = kernel_host.NestedTransport(RelayHost(1), '/run/l2.qga')
    with pytest.raises(OSError, match='Traceback') as e:
        broken({'execute': 'guest-ping'}, 5)
    assert not isinstance(e.value, TimeoutError)


def test_the_relay_script_compiles():
    compile(kernel_host._QGA_RELAY, 'relay', 'exec')
