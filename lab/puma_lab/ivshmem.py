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

from puma_lab import daemon
from puma_lab import errors
from puma_lab import paths

READY_TIMEOUT = 15
# The device's slot on the guests' root bus, so that tests know its name.
PCI_SLOT = 0x10
PCI_ADDR = '0000:00:%02x.0' % PCI_SLOT


class IvshmemServer(daemon.Daemon):
    """One ivshmem-server: SIZE_MB of shared memory, VECTORS doorbells."""

    def __init__(self, lab, name='ivshmem', size_mb=4, vectors=1):
        self.dir = lab.path(name)
        super().__init__(name, os.path.join(self.dir, 'ivshmem-server.log'))
        self.lab = lab
        self.size_mb = size_mb
        self.vectors = vectors
        self.socket = os.path.join(self.dir, 'ivshmem.sock')

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
        self.spawn(argv)
        self.lab.register(self, 'guest')
        return self.wait_ready(lambda: os.path.exists(self.socket),
                               'listening on %s' % self.socket,
                               READY_TIMEOUT)

    def qemu_args(self, index):
        """QEMU arguments for a guest's ivshmem-doorbell device."""
        chardev = 'ivs%d' % index
        return ['-chardev', 'socket,id=%s,path=%s' % (chardev, self.socket),
                '-device', 'ivshmem-doorbell,chardev=%s,vectors=%d,addr=%#x'
                % (chardev, self.vectors, PCI_SLOT)]

    def stop(self, timeout=10):
        """SIGTERM to the server's PID, SIGKILL if it lingers."""
        try:
            self.terminate(timeout)
        except daemon.Lingered:
            pass  # killed
