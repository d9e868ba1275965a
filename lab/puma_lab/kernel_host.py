# SPDX-License-Identifier: Apache-2.0
"""Kernel hosts: lab guests that are real KVM hosts.

A kernel host is an L1 guest under TCG with ``-cpu max`` (SVM and nested
paging) running the lab's stock Debian 6.12 kernel.  It loads Debian's
``kvm_amd`` and runs L2 guests under KVM with the lab's QEMU build, so the
host-kernel side of a feature (KVM, KSM, the host page cache) runs for
real on a machine without usable hardware KVM.

The host's root is shared read-only into the kernel host (9p, mounted on
``/mnt/host``); L2 QEMUs run chrooted there, with the kernel host's own
``/dev``, ``/proc``, ``/sys`` and a tmpfs mounted over the share, so they
use the host's libraries, firmware and the lab's cache exactly as the lab's
L1 QEMUs do.  Nothing of the host can be written from the kernel host but
one directory of its own in the lab's run directory (a second 9p share),
where the L2 consoles go: the lab reads them without asking the kernel
host's agent, which answers slowly while an L2 guest boots.
"""

import json
import os
import random
import re
import shlex
import subprocess
import time

from puma_lab import agent
from puma_lab import errors
from puma_lab import host_cache
from puma_lab import paths
from puma_lab import vm

SHARE = '/mnt/host'
# The kernels a kernel host boots: the stock one, or lab/setup khost's.
HOST_KERNELS = ('6.12', 'khost')
# Where the L2 guests' files live: a tmpfs of the kernel host, seen as
# /run/puma-l2 inside the chroot.
L2_DIR = '/run/puma-l2'
# The writable share for L2 consoles, as seen inside the chroot.
L2_OUT = '/run/puma-l2-out'
L2_BOOT_TIMEOUT = 300
# One QMP command to an L2 QEMU, through qemu.qmp (lab/requirements.txt),
# run in the chroot by the lab's own venv (QMP_PYTHON: the host's root,
# which the chroot shares, /tmp excepted): argv[1] the socket, argv[2]
# the request.  It prints QEMU's whole response, error included.
QMP_ONE = r'''
import json, sys
from qemu.qmp import legacy
mon = legacy.QEMUMonitorProtocol(sys.argv[1])
mon.settimeout(60)
mon.connect()
try:
    print(json.dumps(mon.cmd_obj(json.loads(sys.argv[2]))))
finally:
    mon.close()
'''
QMP_PYTHON = os.path.join(paths.CACHE, 'venv', 'bin', 'python')
# Agent requests to a kernel host: its two TCG vCPUs also emulate the SVM
# world switches of its L2 guests, so a request can take many seconds.
REQUEST_TIMEOUT = 90
# While an L2 guest boots, how often to ask whether its QEMU still runs.
ALIVE_EVERY = 15
# Seconds a kernel host whose agent went away has to end, before it
# counts as still running (its agent socket goes first).
ENDING_GRACE = 5
# The lab init's ready line on an L2 console, release included: what
# follows the release shows the line was not cut at the end of the file.
READY_LINE = re.compile(r'puma-guest: ready [^\s\[]+(?=[\s\[])')
# What a guest kernel prints when it dies on its own: an L2 guest that
# rebooted after one of these failed, it did not lose its machine.
KERNEL_DEATH = ('Kernel panic', 'BUG:', 'Oops', 'general protection',
                'Call Trace')
# A kernel host's console: a CPU whose timer interrupt TCG lost, and the
# stalls that follow a CPU TCG runs too late or not at all.
LOST_TIMER = ("timer wakeup didn't happen",)
STALLS = ('detected stalls on CPUs', 'self-detected stall on CPU',
          'kthread starved for', 'soft lockup - CPU')
# How long a probe of a kernel host's CPUs and share may take (a command
# there takes about a second, many while an L2 guest works).
PROBE_TIMEOUT = 45
# The header SysRq w prints before the tasks it found blocked.
BLOCKED_MARK = 'Show Blocked State'
# Seconds the console is given to take SysRq w's output.
SYSRQ_SETTLE = 2


class MachineFault(errors.LabError):
    """The emulated machine failed under a guest, not the guest's code.

    A kernel host's QEMU ended (a reset under ``-no-reboot``: a triple
    fault) or its agent stopped answering, or an L2 guest started booting
    again with no panic or oops on its console before (KVM's shutdown
    exit, a triple fault).  These happen under Debian's KVM as under ours,
    with no Puma module loaded (docs/lab.md, "Kernel hosts"): TCG's
    emulation of nested SVM.
    """


# An L2 oops's RIP and EFLAGS lines ("RIP: 0010:entry_SYSCALL_64+0x0/0x29").
_OOPS_RIP = re.compile(r'RIP: 0010:(\S+)/')
_OOPS_EFLAGS = re.compile(r'EFLAGS: ([0-9a-f]+)')
_IF = 1 << 9


def impossible_event(lines):
    """A double fault no x86 CPU raises there, as a fault text, or None.

    SYSCALL enters entry_SYSCALL_64 at CPL 0 on the user's stack with
    interrupts off (FMASK clears IF); its first instruction switches GS
    and the next ones the stack. Before them the only events x86 delivers
    are those with a stack of their own (NMI, #DB, #MC and #DF: IST), so
    a double fault whose RIP is entry_SYSCALL_64+0x0 with IF clear means
    that the emulated CPU delivered an event on the user stack there
    (SMAP refuses the push, the #PF for it faults too). CI of 2026-11-29:
    a 6.1 guest under nested SVM died so in its native (IPI) run, before
    any Puma module ran in it.
    """
    for i, line in enumerate(lines):
        if 'PANIC: double fault' not in line:
            continue
        oops = lines[i + 1:i + 20]
        rip = next((m.group(1) for m in map(_OOPS_RIP.search, oops) if m),
                   None)
        flags = next((int(m.group(1), 16)
                      for m in map(_OOPS_EFLAGS.search, oops) if m), None)
        if rip == 'entry_SYSCALL_64+0x0' and flags is not None and \
                not flags & _IF:
            return ('it died of a double fault at entry_SYSCALL_64+0x0 with '
                    'interrupts off (EFLAGS %x): an event delivered on the '
                    'user stack where x86 delivers none' % flags)
    return None


class KernelHost(vm.Guest):
    """An L1 guest under TCG that runs KVM (stock kvm_amd).

    KERNEL is ``6.12``, the lab's stock Debian kernel, or ``khost``, the
    kernel lab/setup khost builds from the same source with our KSM series
    (KVM built in, no modules).
    """

    def __init__(self, lab, name, mem_mb=1536, vcpus=2, extra_args=(),
                 kernel='6.12', **kwargs):
        if kernel not in HOST_KERNELS:
            raise ValueError('kernel host kernel %r: one of %s'
                             % (kernel, ', '.join(HOST_KERNELS)))
        # The kernel host's one writable place of the host: L2 consoles.
        self.out_dir = lab.path(name, 'l2')
        out = ['-fsdev', 'local,id=fsl2,path=%s,security_model=none'
               % self.out_dir,
               '-device', 'virtio-9p-pci,fsdev=fsl2,mount_tag=l2out',
               # A kernel host that resets (a triple fault, a panic) ends
               # instead of booting again under the lab's feet.
               '-no-reboot']
        super().__init__(lab, name, mem_mb=mem_mb,
                         kernel=(paths.khost_kernel() if kernel == 'khost'
                                 else kernel),
                         vcpus=vcpus, cpu='max', share='/',
                         share_readonly=True,
                         extra_args=out + list(extra_args), **kwargs)
        self.agent.request_timeout = REQUEST_TIMEOUT
        self.kvm_ready = False
        self.kvm_patched = False

    def start(self):
        os.makedirs(self.out_dir, exist_ok=True)
        return super().start()

    def sh(self, script, timeout=120, check=True):
        return self.run('sh -c %s' % shlex.quote(script), timeout=timeout,
                        check=check)

    def run(self, command, timeout=60, check=True):
        # A kernel host whose agent stops answering has usually hung or
        # stalled (RCU stalls, a halted CPU): say so with its console.
        try:
            return super().run(command, timeout=timeout, check=check)
        except errors.LabError as e:
            if 'agent' not in str(e) and 'polls unanswered' not in str(e):
                raise
            # The agent's socket goes before QEMU has ended: give it a
            # moment to say which it was.
            if not self.alive(grace=ENDING_GRACE):
                raise MachineFault(str(self._diagnose(
                    'QEMU ended (%d): the kernel host reset under '
                    '-no-reboot; %s' % (self.proc.returncode, e)))) from e
            stall = self.stall_line()
            if stall:
                raise MachineFault(str(self._diagnose(
                    'its agent stopped answering after a CPU stalled '
                    '("%s"); %s' % (stall, e)))) from e
            stuck = self.unresponsive()
            if stuck:
                raise MachineFault(str(self._diagnose(
                    'its agent answers, but %s; %s' % (stuck, e)))) from e
            raise self._diagnose(str(e)) from e

    def unresponsive(self):
        """What a kernel host whose agent answers no longer runs, or None.

        CI of 2026-12-07: an L2 guest's agent relay (python3 in the chroot)
        never ended, and then each KVM selftest (in the chroot too) ran out
        of its 180 s, while the kernel host's agent answered every poll and
        its console said nothing (a killable wait is no hung task).  So
        each CPU must run ``true`` (taskset), and the chroot must answer a
        lookup on the 9p share of the host's root; on the first that does
        not end in PROBE_TIMEOUT, the tasks blocked then go to the console
        (SysRq w) and into the answer.
        """
        probes = ['taskset -c %d true' % cpu for cpu in range(self.vcpus)]
        probes.append('chroot %s sh -c "! test -e /.puma-probe-%d"'
                      % (SHARE, random.randrange(1 << 30)))
        for probe in probes:
            try:
                vm.Guest.run(self, probe, timeout=PROBE_TIMEOUT, check=False)
            except errors.LabError as e:
                if 'still running after' not in str(e):
                    return None  # its agent failed: answers() tells
                return '"%s" did not end in %d s (%s)%s' % (
                    probe, PROBE_TIMEOUT, e, self.blocked_tasks())
        return None

    def blocked_tasks(self):
        """The tasks blocked now, from SysRq w on the console, as text."""
        try:
            vm.Guest.run(self, 'echo w > /proc/sysrq-trigger',
                         timeout=PROBE_TIMEOUT, check=False)
        except errors.LabError as e:
            return '; SysRq w: %s' % e
        time.sleep(SYSRQ_SETTLE)
        try:
            with open(self.console_log, errors='replace') as f:
                text = f.read()
        except FileNotFoundError:
            return ''
        at = text.rfind(BLOCKED_MARK)
        if at < 0:
            return '; SysRq w printed nothing'
        return '; blocked tasks:\n' + '\n'.join(
            text[at:].splitlines()[:80])

    def alive(self, grace=0):
        """Whether the kernel host's QEMU still runs (after GRACE s)."""
        if self.proc is None:
            return False
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return True
        return False

    def answers(self):
        """Whether the kernel host runs and its agent answers."""
        if not self.alive():
            return False
        try:
            self.run('true', timeout=60)
        except errors.LabError:
            return False
        return True

    def _console_lines(self, marks):
        """The kernel host's console lines that hold one of MARKS."""
        try:
            with open(self.console_log, errors='replace') as f:
                return [line.strip() for line in f
                        if any(m in line for m in marks)]
        except FileNotFoundError:
            return []

    def lost_timer(self):
        """The console line that says the kernel host lost a timer, or None.

        RCU's "timer wakeup didn't happen" is a CPU whose armed timer
        interrupt never came: the interrupt delivery TCG emulates lost it
        (docs/lab.md, "Kernel hosts"), and the CPU stays stuck (the
        bench of 2026-11-27: CPU 0, then soft lockups of CPU 1 waiting
        for it).
        """
        return (self._console_lines(LOST_TIMER) or [None])[0]

    def stall_line(self):
        """The first console line that says a CPU stalled, or None.

        An RCU stall or a soft lockup alone may pass (a CPU TCG ran
        late); with an agent that stopped answering it is a lost machine
        (CI of 2026-11-28: CPU 0 stalled, then khugepaged locked CPU 1,
        and the kernel host never answered again).  A stall our KVM
        causes comes back on every new machine, and still fails.
        """
        return (self._console_lines(STALLS) or [None])[0]

    def panic_line(self):
        """The kernel host's last "Kernel panic" console line, or None.

        Our KVM runs in the kernel host: a panic there may be ours, not
        TCG's.  It is still a lost machine to the tests, which retry on a
        new one (2026-11-28: "corrupted stack end detected inside
        scheduler" once, cause open), but the line goes into the fault's
        message, so the pytest warning shows it.
        """
        return (self._console_lines(('Kernel panic',)) or [None])[-1]

    def healthy(self):
        """Whether the kernel host answers, lost no timer and runs all."""
        return (self.answers() and not self.lost_timer() and
                not self.unresponsive())

    def restart(self):
        """A new kernel host in place of one that ended or went silent.

        Its console so far is kept beside the new one (``console.log.N``);
        KVM is loaded again as it was (ours or Debian's).
        """
        patched = self.kvm_patched
        self.stop()
        n = 1
        while os.path.exists('%s.%d' % (self.console_log, n)):
            n += 1
        if os.path.exists(self.console_log):
            os.rename(self.console_log, '%s.%d' % (self.console_log, n))
        self.kvm_ready = self.kvm_patched = False
        self.start().wait_booted()
        return self.load_kvm(patched=patched)

    def load_kvm(self, patched=False):
        """Load KVM: Debian's kvm_amd, or with PATCHED ours.

        Ours are the modules of ``lab/setup kvm``: the KVM series built out
        of tree against this very kernel's headers.  A KVM loaded before is
        unloaded first (no L2 guest may run).  The khost kernel has KVM
        built in: it is only checked.
        """
        if self.kernel_name == 'khost':
            if patched:
                raise errors.LabError('kernel host %s runs the khost '
                                      'kernel: its KVM is built in, our '
                                      'KVM modules do not load into it'
                                      % self.name)
            npt_before = 0
        else:
            if self.kvm_ready:
                self.sh('rmmod kvm_amd kvm')
            npt_before = self.run('dmesg').out.count('Nested Paging enabled')
            self._modprobe_kvm(patched)
        log = self.run('dmesg').out
        if log.count('Nested Paging enabled') <= npt_before or \
                self.run('test -c /dev/kvm', check=False).rc != 0:
            raise errors.LabError('kernel host %s: kvm_amd loaded without '
                                  'nested paging or /dev/kvm:\n%s'
                                  % (self.name, log[-2000:]))
        self.kvm_patched = patched
        if not self.kvm_ready:
            self._make_chroot()
        self.kvm_ready = True
        return self

    def _modprobe_kvm(self, patched):
        root = SHARE + paths.kernel('6.12').root
        if not patched:
            self.sh('modprobe -d %s kvm_amd' % shlex.quote(root))
            return
        mods = kvm_modules()
        # Their dependencies but kvm itself come from the stock tree.
        deps = set()
        for ko in ('kvm.ko', 'kvm-amd.ko'):
            deps.update(d for d in self.run(
                'modinfo -F depends %s/%s' % (SHARE + mods, ko)
            ).out.strip().split(',') if d and d != 'kvm')
        self.sh('set -e; modprobe -d %s -a %s; insmod %s/kvm.ko; '
                'insmod %s/kvm-amd.ko'
                % (shlex.quote(root), ' '.join(sorted(deps)),
                   SHARE + mods, SHARE + mods))

    def kvm_taint(self):
        """The taint flags of the loaded kvm module (O: out of tree)."""
        return self.run('cat /sys/module/kvm/taint').out.strip()

    def _make_chroot(self):
        # The chroot the L2 QEMUs run in: the host's root, read-only, with
        # this guest's devices, proc, sys and a tmpfs over it.
        self.sh('set -e; r=%s; mount -t tmpfs tmpfs $r/run; '
                'mkdir -p $r%s; mount -t tmpfs tmpfs $r/tmp; '
                'mount --rbind /dev $r/dev; mount -t proc proc $r/proc; '
                'mount -t sysfs sysfs $r/sys; mkdir -p $r%s; '
                'mount -t 9p -o trans=virtio,version=9p2000.L l2out $r%s'
                % (SHARE, L2_DIR, L2_OUT, L2_OUT))

    def kvm_stat(self, name):
        """One of KVM's own counters (debugfs), summed over its VMs."""
        self.sh('mountpoint -q /sys/kernel/debug || '
                'mount -t debugfs debugfs /sys/kernel/debug')
        return int(self.run('cat /sys/kernel/debug/kvm/%s' % name).out)

    def chroot(self, command, timeout=120, check=True):
        """COMMAND in the host-root chroot (where L2 QEMUs run)."""
        return self.sh('chroot %s sh -c %s' % (SHARE, shlex.quote(command)),
                       timeout=timeout, check=check)


def kvm_modules():
    """The host directory of our KVM modules, checked against the kernel."""
    prefix = os.path.join(paths.built('linux'), 'prefix')
    with open(os.path.join(prefix, 'release')) as f:
        built_for = f.read().strip()
    if built_for != paths.kernel('6.12').release:
        raise errors.LabError('our KVM modules were built for %s, kernel '
                              'hosts run %s (run lab/setup kvm)'
                              % (built_for, paths.kernel('6.12').release))
    return prefix


# The relay's exit status when the L2 agent did not answer in time.
RELAY_TIMED_OUT = 124

# Runs in a kernel host's chroot: one request to an L2 guest's agent
# socket, after a guest-sync that flushes what an earlier client left.
_QGA_RELAY = r'''
import json, random, socket, sys
path, req, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
def exchange():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    f = s.makefile("rwb")
    def recv():
        while True:
            line = f.readline()
            if not line:
                sys.exit("guest agent closed the connection")
            line = line.strip(b"\xff \r\n")
            if line:
                return json.loads(line)
    tok = random.randrange(1, 2 ** 31)
    f.write(json.dumps({"execute": "guest-sync",
                        "arguments": {"id": tok}}).encode() + b"\n")
    f.flush()
    while recv().get("return") != tok:
        pass
    f.write(req.encode() + b"\n")
    f.flush()
    return recv()
try:
    print(json.dumps(exchange()))
except TimeoutError:
    sys.exit(%d)
''' % RELAY_TIMED_OUT


class NestedTransport:
    """An L2 guest's agent, relayed by its kernel host's agent."""

    def __init__(self, host, path):
        self.host = host
        self.path = path

    def __call__(self, cmd, timeout):
        p = self.host.chroot('python3 -c %s %s %s %d'
                             % (shlex.quote(_QGA_RELAY),
                                shlex.quote(self.path),
                                shlex.quote(json.dumps(cmd)), timeout),
                             timeout=timeout + REQUEST_TIMEOUT, check=False)
        if p.rc == RELAY_TIMED_OUT:
            raise TimeoutError('relay in %s: no answer in %ds'
                               % (self.host.name, timeout))
        if p.rc != 0:
            raise OSError('relay in %s: %s'
                          % (self.host.name, p.err.strip()[-500:]))
        return json.loads(p.out)


class NestedGuest:
    """An L2 guest: the lab's QEMU under KVM inside a kernel host.

    It boots a stock lab guest kernel with the lab's initramfs and root
    image (the same as an L1 guest's), its console in a file the lab reads.
    Its agent answers through the kernel host's (``run`` as for any lab
    guest, a few seconds a request).  SHARE, a directory below the kernel
    host's ``out_dir``, is shared read-only as the guest's ``/mnt/host``;
    CPU is QEMU's ``-cpu`` (``host`` plus features, e.g. ``kvm-shoot4u=on``).
    MEM_MERGE false opts the guest's RAM out of the kernel host's page
    merging (``-machine mem-merge=off``: what libvirt's ``<nosharepages/>``
    asks of QEMU).  DATA, a (path in the chroot, cache mode) pair, adds a
    data disk (host_cache.py: ``writeback``, ``none`` or ``exclusive``).
    """

    def __init__(self, host, name, kernel='6.1', mem_mb=256, vcpus=1,
                 append='', share=None, cpu='host', mem_merge=True,
                 data=None):
        if not host.kvm_ready:
            raise errors.LabError('kernel host %s: load_kvm() first'
                                  % host.name)
        self.host = host
        self.name = name
        self.kernel = paths.kernel(kernel)
        self.mem_mb = mem_mb
        self.vcpus = vcpus
        self.append = append
        self.cpu = cpu
        self.mem_merge = mem_merge
        self.data = data
        self.share = None
        if share is not None:
            rel = os.path.relpath(share, host.out_dir)
            if rel.startswith('..'):
                raise errors.LabError('an L2 share must be below %s: %s'
                                      % (host.out_dir, share))
            self.share = os.path.join(L2_OUT, rel)
        # Written by the L2 QEMU on the kernel host's writable share, read
        # by the lab directly (kept with the lab's logs).
        self.console_log = '%s/%s.console.log' % (L2_OUT, name)
        self.console_path = os.path.join(host.out_dir,
                                         '%s.console.log' % name)
        # QEMU's own messages (its stderr, which -daemonize keeps only
        # with a log file, -D): why an L2 QEMU ended, when it did.
        self.stderr_log = '%s/%s.qemu.log' % (L2_OUT, name)
        self.stderr_path = os.path.join(host.out_dir, '%s.qemu.log' % name)
        self.trace_log = '%s/%s.qemu-trace.log' % (L2_OUT, name)
        self.pidfile = '%s/%s.pid' % (L2_DIR, name)
        self.qga_path = '%s/%s.qga' % (L2_DIR, name)
        self.qmp_path = '%s/%s.qmp' % (L2_DIR, name)
        self.agent = agent.GuestAgent(NestedTransport(host, self.qga_path),
                                      name, request_timeout=30)

    def argv(self):
        # hpet=disable: with the HPET, SMP L2 guests reset at boot right
        # after "PCI: Using ACPI for IRQ routing", and some took the kernel
        # host with them (docs/lab.md).
        cmdline = ['console=ttyS0', 'loglevel=7', 'no_timer_check',
                   'hpet=disable', 'puma.root=/dev/vda',
                   'puma.hostname=%s' % self.name]
        extra = []
        if self.share:
            extra = ['-fsdev', 'local,id=fs0,path=%s,security_model=none,'
                     'readonly=on' % self.share,
                     '-device', 'virtio-9p-pci,fsdev=fs0,mount_tag=host']
            cmdline.append('puma.share=host')
        # DATA: one (image, mode), or a list of them (data disks 0, 1...).
        disks = [self.data] if isinstance(self.data, tuple) else \
            self.data or []
        for index, (img, mode) in enumerate(disks):
            extra += host_cache.blockdev_args(img, mode, index)
        if self.append:
            cmdline.append(self.append)
        return [paths.qemu_binary(), '-name', self.name,
                '-machine', 'q35,mem-merge=%s'
                % ('on' if self.mem_merge else 'off'),
                '-accel', 'kvm', '-cpu', self.cpu,
                '-smp', str(self.vcpus), '-m', str(self.mem_mb),
                '-nodefaults', '-display', 'none', '-no-user-config',
                '-kernel', self.kernel.vmlinuz,
                '-initrd', self.kernel.initrd,
                '-serial', 'file:' + self.console_log,
                # The lab's init wants its agent port; the agent answers
                # on a socket of the kernel host.
                '-chardev', 'socket,id=qga0,path=%s,server=on,wait=off'
                % self.qga_path,
                '-qmp', 'unix:%s,server=on,wait=off' % self.qmp_path,
                '-device', 'virtio-serial-pci,id=vser0',
                '-device', 'virtserialport,chardev=qga0,'
                           'name=org.qemu.guest_agent.0',
                # Not cache=none as in L1: O_DIRECT fails on the 9p share.
                '-drive', 'file=%s,format=raw,if=none,id=d0,readonly=on'
                % paths.root_image(),
                '-device', 'virtio-blk-pci,drive=d0',
                '-daemonize', '-pidfile', self.pidfile,
                '-D', self.trace_log,
                '-append', ' '.join(cmdline)] + extra

    def start(self):
        self.started = time.monotonic()
        p = self.host.chroot(' '.join(shlex.quote(a) for a in self.argv())
                             + ' 2>>' + shlex.quote(self.stderr_log),
                             check=False)
        if p.rc != 0:
            raise errors.LabError('L2 guest %s in %s did not start: %s%s'
                                  % (self.name, self.host.name, p.out,
                                     self.stderr()))
        return self

    def stderr(self):
        """What the L2 QEMU wrote to its stderr so far."""
        try:
            with open(self.stderr_path, errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def qmp(self, command, **arguments):
        """COMMAND's return from the L2 QEMU's monitor (in the kernel host).

        :raises errors.LabError: QEMU answered with an error.
        """
        request = {'execute': command}
        if arguments:
            request['arguments'] = arguments
        p = self.host.chroot('%s -c %s %s %s' % (
            shlex.quote(QMP_PYTHON), shlex.quote(QMP_ONE),
            shlex.quote(self.qmp_path), shlex.quote(json.dumps(request))))
        reply = json.loads(p.out)
        if 'error' in reply:
            raise errors.LabError('L2 guest %s: %s: %s'
                                  % (self.name, command, reply['error']))
        return reply['return']

    def console(self):
        try:
            with open(self.console_path, errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def running(self):
        """Whether the L2 QEMU runs: True, False, or None if unknown.

        None when the kernel host's agent did not answer the question
        (CI of 2026-11-27: a soft lockup in the kernel host): a late
        answer is no answer, never a QEMU that ended.
        """
        try:
            p = self.host.chroot('kill -0 "$(cat %s)"' % self.pidfile,
                                 check=False)
        except errors.LabError:
            return None
        return p.rc == 0

    def end_evidence(self):
        """What says why the L2 QEMU ended: its stderr, the host's log.

        The kernel host's log names a QEMU the OOM killer took or that
        died of a signal (segfault, trap).
        """
        try:
            log = self.host.run('dmesg').out.splitlines()
        except errors.LabError as e:
            log = ['(dmesg of %s: %s)' % (self.host.name, e)]
        marks = ('qemu', 'Out of memory', 'oom', 'segfault', 'traps:')
        lines = [line for line in log if any(m in line for m in marks)]
        return ('its QEMU\'s stderr: %s; kernel host %s: %s'
                % (self.stderr().strip()[-1000:] or '(empty)',
                   self.host.name, '\n'.join(lines[-10:]) or
                   '(nothing on QEMU in its log)'))

    def ksm_merging_pages(self):
        """The pages of this guest's QEMU that KSM merged (its /proc)."""
        pid = int(self.host.chroot('cat %s' % self.pidfile).out.strip())
        return int(self.host.run('cat /proc/%d/ksm_merging_pages'
                                 % pid).out.strip())

    def wait_booted(self, timeout=L2_BOOT_TIMEOUT):
        """Wait for the lab init's ready line on the L2 console.

        The console is read from the host; the kernel host's agent is
        asked only every ALIVE_EVERY seconds whether QEMU still runs.
        A boot that stops with nothing on its console (no panic, no
        oops) while nothing of ours runs in the guest yet is a machine
        fault (MachineFault, see boot_fault), as is a lost kernel host.
        """
        deadline = time.monotonic() + timeout
        next_alive = time.monotonic() + ALIVE_EVERY
        while time.monotonic() < deadline:
            # The whole line: the console file may end inside it (a test
            # once read 'puma-guest: ready 6.1.0-' from it).
            if READY_LINE.search(self.console()):
                self.boot_s = time.monotonic() - self.started
                return self
            if time.monotonic() >= next_alive:
                running = self.running()
                if not running:
                    if not self.host.answers():
                        panic = self.host.panic_line()
                        raise MachineFault(
                            'L2 guest %s: its kernel host %s does not '
                            'answer while it boots%s'
                            % (self.name, self.host.name,
                               '; its console: ' + panic if panic else ''))
                    lost = self.host.lost_timer()
                    if lost:
                        raise MachineFault(
                            'L2 guest %s ended while it booted; its kernel '
                            'host %s lost a timer interrupt: %s'
                            % (self.name, self.host.name, lost))
                    # The kernel host answers again: a probe that got no
                    # answer is asked again, only a QEMU that is gone has
                    # ended.
                    if running is False or self.running() is False:
                        raise errors.LabError(
                            'L2 guest %s exited (%s):\n%s'
                            % (self.name, self.end_evidence(),
                               self.console()[-2000:]))
                next_alive = time.monotonic() + ALIVE_EVERY
            time.sleep(0.5)
        console = self.console()
        fault = self.boot_fault(console)
        msg = ('L2 guest %s did not boot in %ds%s:\n%s'
               % (self.name, timeout, ': ' + fault if fault else '',
                  console[-2000:]))
        raise MachineFault(msg) if fault else errors.LabError(msg)

    def boot_fault(self, console):
        """Why a boot that did not end is the machine's, or None.

        It is when the console stopped without a kernel death (a panic,
        an oops) and the kernel host still answers: before the ready line
        the guest runs only the stock kernel and the lab's init, so what
        stops it is the emulation under it (docs/lab.md, "Kernel hosts"),
        as when TCG lost an interrupt (QEMU patch 0026).
        """
        if any(m in console for m in KERNEL_DEATH):
            return None
        if not self.host.answers():
            return 'its kernel host does not answer'
        last = console.strip().splitlines()[-1:] or ['(nothing)']
        return ('its boot stopped with nothing on its console after "%s"'
                % last[0].strip()[-160:])

    def run(self, command, timeout=120, check=True):
        # Only a failed exchange with the agent can be a lost machine; a
        # command that ran and failed is the guest's.
        res = self._exchange(self.agent.run, command, timeout=timeout,
                             check=False)
        if check:
            self.agent.check(command, res)
        return res

    def spawn(self, command):
        """``agent.spawn(COMMAND)``, a failure told as run() tells it."""
        return self._exchange(self.agent.spawn, command)

    def wait(self, pid, timeout):
        """The result of PID (from spawn()), as run() tells faults.

        A guest that reset while the command ran answers that it knows
        no such pid: without this, a caller that spawned commands in
        several guests at once saw a plain error (``lab/bench ksm``'s
        caching half, 2026-12-07: "guest-exec-status: Invalid parameter
        'pid'").
        """
        return self._exchange(self.agent.wait, pid, timeout)

    def _exchange(self, call, *args, **kwargs):
        """CALL(*ARGS, **KWARGS) to the agent, its failure told apart.

        As a fault of the machine (MachineFault), a death of the guest,
        or as itself.
        """
        try:
            return call(*args, **kwargs)
        except MachineFault:
            raise
        except errors.LabError as e:
            fault = self.machine_fault()
            if not fault and not self.host.answers():
                fault = ('its kernel host does not answer:\n%s'
                         % self.host._diagnose('agent silent'))
            if not fault and self.host.lost_timer():
                fault = ('its kernel host lost a timer interrupt: %s'
                         % self.host.lost_timer())
            if not fault and self.host.stall_line():
                fault = ('a CPU of its kernel host stalled: %s'
                         % self.host.stall_line())
            if not fault:
                stuck = self.host.unresponsive()
                if stuck:
                    fault = 'its kernel host answers, but %s' % stuck
            if fault:
                raise MachineFault('L2 guest %s in %s: %s; %s'
                                   % (self.name, self.host.name, fault,
                                      e)) from e
            death = self.death_line()
            if death:
                # Its own death, not its machine's: named, not retried.
                raise errors.LabError('L2 guest %s in %s died: "%s"; %s'
                                      % (self.name, self.host.name, death,
                                         e)) from e
            raise

    def death_line(self):
        """The first line of the guest's own death on its console, or None.

        CI of 2026-11-29: a 6.1 guest died of a double fault at syscall
        entry and the test reported only its silent agent.
        """
        for line in self.console().splitlines():
            if any(m in line for m in KERNEL_DEATH + ('PANIC:',)):
                return line.strip()[-200:]
        return None

    def machine_fault(self):
        """Why the L2 guest's machine failed under it, or None.

        It did if its kernel started again without a panic or an oops
        before (the lab's init never reboots), or if it died of an event
        delivered where x86 delivers none (impossible_event()).
        """
        lines = self.console().splitlines()
        impossible = impossible_event(lines)
        if impossible:
            return impossible
        starts = [i for i, line in enumerate(lines)
                  if 'Linux version ' in line]
        if len(starts) < 2:
            return None
        before = lines[starts[-2]:starts[-1]]
        if any(m in line for line in before for m in KERNEL_DEATH):
            return None
        return ('it reset with nothing on its console (boot %d began '
                'after "%s")' % (len(starts), before[-1].strip()[-160:]))

    def tlb_ipis(self):
        """TLB shootdown IPIs the guest received, summed over its CPUs."""
        return vm.tlb_ipis(self.run('cat /proc/interrupts').out, self.name)

    def stop(self):
        # An L2 guest ends with its kernel host.
        if self.host.alive():
            self.host.chroot('kill "$(cat %s)" 2>/dev/null; true'
                             % self.pidfile)
