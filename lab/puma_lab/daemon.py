# SPDX-License-Identifier: Apache-2.0
"""A server process the lab starts, waits for, and ends by its PID.

The lab's own daemons (a memory server, nbdkit behind a modelled disk,
QEMU's ivshmem-server) run in the foreground with their output in a log
file: :class:`Daemon` starts one, waits until it serves (a condition of
the caller's, e.g. a line in its log or a socket on disk) or says why it
exited, and ends it with SIGTERM, then SIGKILL if it lingers.
"""

import signal
import subprocess
import time

from puma_lab import errors

READY_TIMEOUT = 15
POLL_S = 0.05


class Lingered(errors.LabError):
    """The daemon ignored SIGTERM and was killed."""


class Daemon:
    """One process, its output in LOG; NAME is what errors call it."""

    def __init__(self, name, log):
        self.name = name
        self.log = log
        self.proc = None

    def spawn(self, argv, append=False, env=None):
        """Start ARGV with its output in the log (appended if APPEND).

        :param env: its environment (default: the lab's own).
        """
        with open(self.log, 'a' if append else 'w') as log:
            if append:
                log.write('+ %s\n' % ' '.join(argv))
                log.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, env=env)
        return self

    def wait_ready(self, ready, what, timeout=READY_TIMEOUT, poll=POLL_S):
        """Wait until READY() is true (asked every POLL seconds).

        WHAT names the condition in the error.

        :raises LabError: the process exited first (its status and
            output in the message), or TIMEOUT seconds passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise errors.LabError('%s exited with %d before %s: %s'
                                      % (self.name, self.proc.returncode,
                                         what, self.output()))
            if ready():
                return self
            if time.monotonic() >= deadline:
                raise errors.LabError('%s: not %s within %ds: %s'
                                      % (self.name, what, timeout,
                                         self.output()))
            time.sleep(poll)

    def output(self):
        try:
            with open(self.log, errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, timeout=10):
        """SIGKILL, and reap it."""
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout)

    def terminate(self, timeout=15):
        """SIGTERM; its exit status (None if it never ran).

        :raises Lingered: it was still running TIMEOUT seconds later (it
            is killed).
        """
        if not self.alive():
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Lingered('%s ignored SIGTERM for %ds'
                           % (self.name, timeout))
