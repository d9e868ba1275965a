# SPDX-License-Identifier: Apache-2.0
"""Run commands in a guest through qemu-guest-agent.

The agent speaks JSON over a virtio-serial port.  The lab reaches it either
directly through the unix socket QEMU exposes (guests started by
:mod:`puma_lab.vm`) or through libvirt (``virsh qemu-agent-command``) for
guests libvirt manages, which keeps working across migrations.
"""

import base64
import json
import random
import socket
import subprocess
import threading
import time

from puma_lab import errors


# Status polls in a row an agent may answer too late before wait() gives
# up on it (each waits request_timeout seconds).
LATE_POLLS_IN_A_ROW = 4


class AgentTimeout(errors.LabError):
    """The agent did not answer one request in time."""


class SocketTransport:
    """One request/response per connection on QEMU's agent chardev."""

    def __init__(self, path):
        self.path = path

    def __call__(self, cmd, timeout):
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.path)
            f = s.makefile('rwb')
            # guest-sync flushes whatever a previous client left behind.
            token = random.randrange(1, 2 ** 31)
            self._send(f, {'execute': 'guest-sync',
                           'arguments': {'id': token}})
            while self._recv(f, deadline).get('return') != token:
                pass
            self._send(f, cmd)
            return self._recv(f, deadline)

    @staticmethod
    def _send(f, obj):
        f.write(json.dumps(obj).encode() + b'\n')
        f.flush()

    @staticmethod
    def _recv(f, deadline):
        while time.monotonic() < deadline:
            line = f.readline()
            if not line:
                raise errors.LabError('guest agent closed the connection')
            line = line.strip(b'\xff \r\n')
            if line:
                return json.loads(line)
        raise TimeoutError('guest agent did not answer in time')


class SerializedTransport:
    """TRANSPORT's requests one at a time, for threads sharing one agent.

    QEMU's agent chardev takes one connection at a time: a second
    connect while one is open fails at once with EAGAIN (``lab/bench ksm
    --phase dynamic`` lost a run to it, its sampling thread and its main
    thread asking one kernel host's agent together).
    """

    def __init__(self, transport):
        self.transport = transport
        self.lock = threading.Lock()

    def __call__(self, cmd, timeout):
        with self.lock:
            return self.transport(cmd, timeout)


class VirshTransport:
    """The agent of a libvirt domain, through virsh."""

    def __init__(self, virsh, domain):
        self.virsh = virsh
        self.domain = domain

    def __call__(self, cmd, timeout):
        out = self.virsh('qemu-agent-command', self.domain,
                         '--timeout', str(int(max(timeout, 1))),
                         json.dumps(cmd), timeout=timeout + 10)
        return json.loads(out)


class ExecResult:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def __repr__(self):
        return 'ExecResult(rc=%r, out=%r, err=%r)' % (self.rc, self.out,
                                                      self.err)


class GuestAgent:
    """Commands in the guest, with their output and exit status."""

    def __init__(self, transport, name, request_timeout=10):
        self.transport = transport
        self.name = name
        # How long one request may take: a guest that is busy (a kernel
        # host running L2 guests under emulated SVM) answers slowly.
        self.request_timeout = request_timeout

    def request(self, execute, timeout=None, **arguments):
        if timeout is None:
            timeout = self.request_timeout
        cmd = {'execute': execute}
        if arguments:
            cmd['arguments'] = arguments
        try:
            reply = self.transport(cmd, timeout)
        except TimeoutError as e:
            raise AgentTimeout('guest %s: agent %s did not answer in %ds: %s'
                               % (self.name, execute, timeout, e)) from e
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            raise errors.LabError('guest %s: agent %s failed: %s'
                                  % (self.name, execute, e)) from e
        if 'error' in reply:
            raise errors.LabError('guest %s: agent %s: %s'
                                  % (self.name, execute,
                                     reply['error'].get('desc')))
        return reply.get('return')

    def ping(self, timeout=2):
        try:
            self.request('guest-ping', timeout=timeout)
            return True
        except errors.LabError:
            return False

    def spawn(self, command):
        """Start ``sh -c COMMAND`` in the guest; returns its pid."""
        ret = self.request('guest-exec', path='/bin/sh',
                           arg=['-c', command], **{'capture-output': True})
        return ret['pid']

    def status(self, pid):
        """None while running, else an ExecResult."""
        st = self.request('guest-exec-status', pid=pid)
        if not st.get('exited'):
            return None
        out = base64.b64decode(st.get('out-data', '')).decode(errors='replace')
        err = base64.b64decode(st.get('err-data', '')).decode(errors='replace')
        return ExecResult(st.get('exitcode', -st.get('signal', 0)), out, err)

    def wait(self, pid, timeout):
        """PID's result, polled until TIMEOUT seconds have passed.

        A poll the agent does not answer in time is asked again: a guest
        whose vCPUs are all busy (a workload on every vCPU of an L2 guest
        under emulated SVM) answers late, not never, and the agent keeps
        the result until one poll returns it.  A command that never ends
        still fails at TIMEOUT, and an agent that stopped answering fails
        after LATE_POLLS_IN_A_ROW polls it did not answer in time.
        """
        deadline = time.monotonic() + timeout
        late = in_a_row = 0
        while time.monotonic() < deadline:
            try:
                res = self.status(pid)
            except AgentTimeout:
                late += 1
                in_a_row += 1
                if in_a_row == LATE_POLLS_IN_A_ROW:
                    raise
                continue
            except errors.LabError as e:
                if not late:
                    raise
                # The agent forgets a result once a poll returned it: an
                # answer that came too late took it along.
                raise errors.LabError('%s (after %d polls answered too late, '
                                      'the last may have taken the result)'
                                      % (e, late)) from e
            in_a_row = 0
            if res is not None:
                return res
            time.sleep(0.2)
        raise errors.LabError('guest %s: command pid %d still running after '
                              '%ds (%d polls unanswered)'
                              % (self.name, pid, timeout, late))

    def run(self, command, timeout=60, check=True):
        """Run COMMAND to completion; raise on a non-zero exit if CHECK."""
        res = self.wait(self.spawn(command), timeout)
        if check:
            self.check(command, res)
        return res

    def check(self, command, res):
        """Raise if COMMAND's result RES is a non-zero exit."""
        if res.rc != 0:
            raise errors.LabError('guest %s: %r exited %s: %s%s'
                                  % (self.name, command, res.rc, res.out,
                                     res.err))
