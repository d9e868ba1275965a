# SPDX-License-Identifier: Apache-2.0
"""A disk with a per-request latency: nbdkit's file plugin + delay filter.

The lab's guests run under TCG, which stretches everything that crosses
a virtual NIC (a guest-to-guest round trip of about 2 ms, against tens of
microseconds on KVM) while a disk emulated by QEMU is as fast as the
host's page cache.  Comparing remote memory with a disk therefore needs
the disk slowed by the same factor as the network.  This module models
it explicitly:

- ``dilation(rtt_us, kvm_rtt_us)``: how much slower the lab's network
  is than the reference (a round trip measured in the same run against a
  documented KVM figure);
- ``DEVICE_MS``: the named device classes, the latency of one 4 KiB
  random read on a real cloud (``netvol``: a network SSD volume, ``hdd``:
  a hard disk);
- ``ModelledDisk``: an image served read-only by ``nbdkit`` on a unix
  socket with ``--filter=delay rdelay=...`` (every read request waits that
  long; requests overlap, as on a volume that serves a queue), attached
  to the guest through QEMU's NBD client with a reconnect delay, so that
  ``set_delay`` can replace nbdkit by one with another latency while the
  guest runs (QEMU reconnects and resends what was in flight; the image
  is read-only, so a resent read is harmless).

Only the latency per request is modelled, not bandwidth: a 512 KiB
readahead request costs what a 4 KiB one does.
"""

import os

from puma_lab import daemon
from puma_lab import errors
from puma_lab import vm

# Latency of one random 4 KiB read, ms, on the device classes the bench
# models (not measured here: typical figures; see docs/benchmarks.md).
DEVICE_MS = {'netvol': 1.0, 'hdd': 8.0}
# Round trip between two KVM guests on one host (virtio-net, vhost-net,
# a Linux bridge), us: the reference the lab's round trip is compared
# with.  An assumption, not a measurement: see docs/benchmarks.md.
KVM_RTT_US = 50.0
READY_TIMEOUT = 30
# How long QEMU's NBD client waits for nbdkit to come back, s.
RECONNECT_S = 60


def dilation(rtt_us, kvm_rtt_us=KVM_RTT_US):
    """How many times slower the lab's round trip is than KVM's."""
    if rtt_us <= 0 or kvm_rtt_us <= 0:
        raise errors.LabError('round trips must be positive: %r, %r'
                              % (rtt_us, kvm_rtt_us))
    return rtt_us / kvm_rtt_us


def modelled_ms(device, factor):
    """The per-request delay of DEVICE in the lab, ms (DEVICE_MS x factor)."""
    try:
        return DEVICE_MS[device] * factor
    except KeyError:
        raise errors.LabError('unknown device class %r (known: %s)'
                              % (device, ', '.join(sorted(DEVICE_MS))))


def nbdkit_argv(image, socket, pidfile, delay_ms):
    """nbdkit serving IMAGE read-only on SOCKET, DELAY_MS per read."""
    argv = ['nbdkit', '--foreground', '--readonly', '--exit-with-parent',
            '--unix', socket, '--pidfile', pidfile]
    if delay_ms > 0:
        # The delay filter takes whole milliseconds ("NNms").
        argv += ['--filter=delay']
    argv += ['file', 'file=%s' % image]
    if delay_ms > 0:
        argv += ['rdelay=%dms' % max(1, round(delay_ms))]
    return argv


class ModelledDisk(daemon.Daemon):
    """IMAGE behind nbdkit with a per-read delay; ``disk`` is for vm.Guest."""

    def __init__(self, lab, name, image, delay_ms=0):
        super().__init__('nbdkit for %s' % name,
                         lab.path('%s.nbdkit.log' % name))
        self.lab = lab
        self.image = image
        self.socket = lab.path('%s.nbd' % name)
        self.pidfile = lab.path('%s.nbdkit.pid' % name)
        self.delay_ms = delay_ms
        self.disk = vm.Disk(image, readonly=True, nbd_socket=self.socket,
                            nbd_reconnect_s=RECONNECT_S)

    def start(self):
        for f in (self.socket, self.pidfile):
            if os.path.exists(f):
                os.unlink(f)
        argv = nbdkit_argv(self.image, self.socket, self.pidfile,
                           self.delay_ms)
        self.spawn(argv, append=True)
        if self not in self.lab.guests:
            self.lab.register(self, 'guest')
        return self.wait_ready(lambda: os.path.exists(self.pidfile),
                               'writing its pid file', READY_TIMEOUT)

    def set_delay(self, delay_ms):
        """Restart nbdkit with DELAY_MS per read (QEMU reconnects).

        The old server is killed (SIGKILL): on SIGTERM nbdkit shuts its
        connections down cleanly, which QEMU's client takes as the end
        of the export, not as a lost connection to wait for (seen with
        qemu-io: "Cannot send after transport endpoint shutdown").
        """
        self.kill()
        self.delay_ms = delay_ms
        return self.start()

    def stop(self, timeout=15):
        try:
            self.terminate(timeout)
        except daemon.Lingered:
            pass  # killed
