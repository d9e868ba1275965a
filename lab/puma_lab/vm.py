# SPDX-License-Identifier: Apache-2.0
"""Guests under QEMU TCG, started directly (no libvirt).

A :class:`Guest` boots one of the Debian guest kernels with the lab's
initramfs and the shared read-only root image, under multi-threaded TCG
(there is no usable hardware KVM on lab machines).  Each guest gets a QMP
socket, a guest-agent socket and a console log in the lab's run directory;
its NICs are taps on the lab bridge, inside the lab's network namespace.
"""

import dataclasses
import os
import subprocess
import time

from qemu.qmp import legacy as qmp_legacy
from qemu.qmp import protocol as qmp_protocol
from qemu.qmp import qmp_client

from puma_lab import agent
from puma_lab import errors
from puma_lab import netns
from puma_lab import paths

QMP_NEGOTIATION_TRIES = 5
BOOT_TIMEOUT = int(os.environ.get('PUMA_BOOT_TIMEOUT', '180'))
# Console lines that mean the guest will never become ready.
FATAL_CONSOLE = ('puma-initramfs: FAILED', 'puma-guest: FAILED',
                 'Kernel panic', 'end Kernel panic')


@dataclasses.dataclass
class Disk:
    """A virtio-blk disk; IOPS/bandwidth limits emulate a cloud volume."""

    path: str
    fmt: str = 'raw'
    readonly: bool = False
    iops: int = 0
    bps: int = 0
    serial: str = ''
    # Served by an NBD server on this unix socket instead of read from
    # PATH (puma_lab.diskmodel); QEMU reconnects for this many seconds.
    nbd_socket: str = ''
    nbd_reconnect_s: int = 0

    def drive_opts(self, drive_id):
        if self.nbd_socket:
            opts = ['driver=%s' % self.fmt, 'file.driver=nbd',
                    'file.server.type=unix',
                    'file.server.path=%s' % self.nbd_socket,
                    'file.reconnect-delay=%d' % self.nbd_reconnect_s,
                    'if=none', 'id=%s' % drive_id]
        else:
            opts = ['file=%s' % self.path, 'format=%s' % self.fmt,
                    'if=none', 'id=%s' % drive_id, 'cache=none',
                    'aio=native']
        if self.readonly:
            opts.append('readonly=on')
        if self.iops:
            opts.append('throttling.iops-total=%d' % self.iops)
        if self.bps:
            opts.append('throttling.bps-total=%d' % self.bps)
        return ','.join(opts)


def make_data_disk(path, size_mb, files_dir=None, label='data',
                   features=None):
    """An ext4 image, filled from FILES_DIR if given, without a loop mount.

    FEATURES is given to mkfs.ext4 -O (e.g. 'inline_data').
    """
    argv = ['mkfs.ext4', '-q', '-F', '-L', label]
    if features:
        argv += ['-O', features]
    if files_dir:
        argv += ['-d', files_dir]
    netns.run(*(argv + [path, '%dM' % size_mb]))
    return Disk(path)


def tlb_ipis(interrupts, name):
    """The TLB shootdown IPIs in /proc/interrupts, summed over CPUs."""
    for line in interrupts.splitlines():
        if line.strip().startswith('TLB:'):
            return sum(int(f) for f in line.split()[1:] if f.isdigit())
    raise errors.LabError('guest %s: no TLB line in /proc/interrupts' % name)


class Guest:
    """One QEMU process running a lab guest."""

    def __init__(self, lab, name, kernel='6.1', mem_mb=512, vcpus=1,
                 disks=(), nics=0, share=None, cpu='max', append='',
                 extra_args=(), ns=None, events=False, share_readonly=False,
                 env=None, ivshmem=None):
        self.lab = lab
        # An ivshmem.IvshmemServer: an ivshmem-doorbell device on it, at
        # PCI address ivshmem.PCI_ADDR.
        self.ivshmem = ivshmem
        # Variables added to QEMU's environment (e.g. a test's LD_PRELOAD).
        self.env = dict(env or {})
        # The namespace QEMU runs in: the lab's, or an emulated host's.
        self.ns = ns or lab.ns
        self.events = events
        self.name = name
        # KERNEL names a stock guest kernel, or is a built one
        # (paths.BuiltKernel: the kernel hosts').
        if isinstance(kernel, paths.BuiltKernel):
            self.kernel_name, self.kernel = kernel.name, kernel
        else:
            self.kernel_name, self.kernel = kernel, paths.kernel(kernel)
        self.mem_mb = mem_mb
        self.vcpus = vcpus
        self.disks = list(disks)
        self.nics = nics
        self.share = share
        self.share_readonly = share_readonly
        self.cpu = cpu
        self.append = append
        self.extra_args = list(extra_args)
        self.dir = lab.path(name)
        self.qmp_path = os.path.join(self.dir, 'qmp.sock')
        self.qga_path = os.path.join(self.dir, 'qga.sock')
        self.events_path = os.path.join(self.dir, 'events.sock')
        self.console_log = os.path.join(self.dir, 'console.log')
        self.qemu_log = os.path.join(self.dir, 'qemu.log')
        self.index = lab.next_index()
        self.addrs = [lab.guest_addr(self.index, n) for n in range(nics)]
        self.taps = ['pt%dg%dn%d' % (lab.num, self.index, n)
                     for n in range(nics)]
        self.proc = None
        self.agent = agent.GuestAgent(agent.SocketTransport(self.qga_path),
                                      name)

    def argv(self):
        # no_timer_check: under TCG on a loaded host the kernel's check
        # that the IO-APIC timer ticks can miss and panic the boot ("IO-APIC
        # + timer doesn't work!"); the usual setting for virtual machines.
        cmdline = ['console=ttyS0', 'loglevel=4', 'no_timer_check',
                   'puma.root=/dev/vda', 'puma.hostname=%s' % self.name]
        argv = [paths.qemu_binary(), '-name', self.name,
                '-machine', 'q35', '-accel', 'tcg,thread=multi',
                '-cpu', self.cpu, '-smp', str(self.vcpus),
                '-m', str(self.mem_mb), '-nodefaults', '-display', 'none',
                '-no-user-config',
                '-kernel', self.kernel.boot_image,
                '-initrd', self.kernel.initrd,
                '-chardev', 'file,id=con0,path=%s' % self.console_log,
                '-serial', 'chardev:con0',
                '-qmp', 'unix:%s,server=on,wait=off' % self.qmp_path,
                '-chardev', 'socket,id=qga0,path=%s,server=on,wait=off'
                % self.qga_path,
                '-device', 'virtio-serial-pci,id=vser0',
                '-device', 'virtserialport,chardev=qga0,'
                           'name=org.qemu.guest_agent.0']
        disks = [Disk(paths.root_image(), readonly=True)] + self.disks
        for i, d in enumerate(disks):
            argv += ['-drive', d.drive_opts('d%d' % i),
                     '-device', 'virtio-blk-pci,drive=d%d%s'
                     % (i, ',serial=%s' % d.serial if d.serial else '')]
        for n, (tap, addr) in enumerate(zip(self.taps, self.addrs)):
            argv += ['-netdev', 'tap,id=n%d,ifname=%s,script=no,downscript=no'
                     % (n, tap),
                     '-device', 'virtio-net-pci,netdev=n%d,mac=%s,romfile='
                     % (n, self.lab.guest_mac(self.index, n))]
            cmdline.append('puma.net=eth%d,%s' % (n, addr))
        if self.share:
            argv += ['-fsdev', 'local,id=fs0,path=%s,security_model=none%s'
                     % (self.share,
                        ',readonly=on' if self.share_readonly else ''),
                     '-device', 'virtio-9p-pci,fsdev=fs0,mount_tag=host']
            cmdline.append('puma.share=host')
        if self.ivshmem:
            argv += self.ivshmem.qemu_args(0)
        if self.events:
            # A second monitor, for a client that listens to events while
            # commands come and go on the first one.
            argv += ['-chardev', 'socket,id=ev0,path=%s,server=on,wait=off'
                     % self.events_path, '-mon', 'chardev=ev0,mode=control']
        if self.append:
            cmdline.append(self.append)
        argv += ['-append', ' '.join(cmdline)] + self.extra_args
        return argv

    def start(self):
        if self.taps and self.ns != self.lab.ns:
            raise errors.LabError('guest %s: lab NICs need the lab namespace'
                                  % self.name)
        os.makedirs(self.dir, exist_ok=True)
        for tap in self.taps:
            netns.add_tap(self.lab.ns, tap)
        with open(self.qemu_log, 'w') as log:
            self.proc = subprocess.Popen(
                ['ip', 'netns', 'exec', self.ns] + self.argv(),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=dict(os.environ, **self.env) if self.env else None)
        self.lab.register(self, 'guest')
        return self

    def console(self):
        try:
            with open(self.console_log, errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def _diagnose(self, why):
        tail = '\n'.join(self.console().splitlines()[-15:])
        try:
            with open(self.qemu_log) as f:
                qlog = f.read().strip()
        except FileNotFoundError:
            qlog = ''
        return errors.LabError(
            'guest %s (kernel %s): %s\n--- qemu: %s\n--- console (%s):\n%s'
            % (self.name, self.kernel.name, why, qlog or '(empty)',
               self.console_log, tail))

    def wait_booted(self, timeout=BOOT_TIMEOUT):
        """Wait until the guest agent answers; a clear error otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise self._diagnose('QEMU exited with %d before the guest '
                                     'was ready' % self.proc.returncode)
            text = self.console()
            for line in text.splitlines():
                if any(marker in line for marker in FATAL_CONSOLE):
                    raise self._diagnose('boot failed: %s' % line.strip())
            if 'puma-guest: ready' in text and self.agent.ping():
                return self
            time.sleep(0.5)
        raise self._diagnose('did not boot within %ds' % timeout)

    def qmp(self, cmd, **args):
        for attempt in range(QMP_NEGOTIATION_TRIES):
            mon = qmp_legacy.QEMUMonitorProtocol(self.qmp_path)
            try:
                mon.connect()
                return mon.cmd(cmd, **args)
            except qmp_protocol.ConnectError as e:
                # An event QEMU sends while the session is being set up
                # (RESUME right after an incoming migration) can come
                # before the answer to qmp_capabilities, which qemu.qmp
                # takes for a failed negotiation: connect again.
                if not isinstance(e.exc, qmp_client.NegotiationError) or \
                        attempt == QMP_NEGOTIATION_TRIES - 1:
                    raise
                time.sleep(0.2)
            finally:
                mon.close()

    def run(self, command, timeout=60, check=True):
        return self.agent.run(command, timeout=timeout, check=check)

    def tlb_ipis(self):
        """TLB shootdown IPIs the guest received, summed over its CPUs."""
        return tlb_ipis(self.run('cat /proc/interrupts').out, self.name)

    def stop(self, timeout=10):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.qmp('quit')
        except Exception:  # noqa: B902 - the process is ended below anyway
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
