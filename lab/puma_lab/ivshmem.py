# SPDX-License-Identifier: Apache-2.0
"""QEMU's ivshmem-server, for guests that share memory with doorbells.

Puma's same-host transport (guest-kmod/puma/shm.c) runs over an
``ivshmem-doorbell`` device in each of two guests, both connected to one
``ivshmem-server``: the server hands each QEMU the shared memory and the
eventfds of the other's doorbells.  :class:`IvshmemServer` runs one in
the foreground under the lab's run directory, with its shared memory in
/dev/shm (created and unlinked at once by the server: nothing is left
behind), in the lab's network namespace, and is ended by its PID at
teardown, after the guests (it registers with the lab before them).  A
guest gets the device with ``vm.Guest(..., ivshmem=server)``, at PCI
address :data:`PCI_ADDR`.
"""

import os
import signal
import subprocess
import time

from puma_lab import errors
from puma_lab import paths

READY_TIMEOUT = 15
# The device's slot on the guests' root bus, so that tests know its name.
PCI_SLOT = 0x10
PCI_ADDR = '0000:00:%02x.0' % PCI_SLOT


class IvshmemServer:
    """One ivshmem-server: SIZE_MB of shared memory, VECTORS doorbells."""

    def __init__(self, lab, name='ivshmem', size_mb=4, vectors=1):
        self.lab = lab
        self.name = name
        self.size_mb = size_mb
        self.vectors = vectors
        self.dir = lab.path(name)
        self.socket = os.path.join(self.dir, 'ivshmem.sock')
        self.log = os.path.join(self.dir, 'ivshmem-server.log')
        self.proc = None

    def start(self):
        binary = paths.ivshmem_server()
        if not os.path.exists(binary):
            raise errors.LabError('%s missing: run lab/setup stack'
                                  % binary)
        os.makedirs(self.dir, exist_ok=True)
        # -F: foreground, so that self.proc.pid is the server's PID (ip
        # netns exec execs it).  In the lab's namespace, like the guests:
        # lab/cleanup, which deletes the namespaces and ends what runs in
        # them, ends a server a crashed run left behind.
        argv = ['ip', 'netns', 'exec', self.lab.ns, binary, '-F', '-v',
                '-S', self.socket, '-m', '/dev/shm',
                '-l', '%dM' % self.size_mb, '-n', str(self.vectors)]
        with open(self.log, 'w') as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        self.lab.register(self, 'guest')
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise errors.LabError('%s exited with %d: %s'
                                      % (self.name, self.proc.returncode,
                                         self.output()))
            if os.path.exists(self.socket):
                return self
            time.sleep(0.1)
        raise errors.LabError('%s: no socket %s within %ds: %s'
                              % (self.name, self.socket, READY_TIMEOUT,
                                 self.output()))

    def qemu_args(self, index):
        """QEMU arguments for a guest's ivshmem-doorbell device."""
        chardev = 'ivs%d' % index
        return ['-chardev', 'socket,id=%s,path=%s' % (chardev, self.socket),
                '-device', 'ivshmem-doorbell,chardev=%s,vectors=%d,addr=%#x'
                % (chardev, self.vectors, PCI_SLOT)]

    def output(self):
        try:
            with open(self.log, errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=10):
        """SIGTERM to the server's PID, SIGKILL if it lingers."""
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
