# SPDX-License-Identifier: Apache-2.0
"""Shoot4U vs native IPIs under vCPU overcommit.

Two 4-vCPU guests share the 2 host cores: one runs a CPU hog on all its
vCPUs, the other runs ``tlbstorm`` (reader threads on every vCPU, mprotect
flips on vCPU 0, each a remote TLB shootdown).  The test guest runs it
with native IPIs and with shoot4u.ko loaded, alternately, in one run.
Figures: shootdown latency percentiles seen by the initiator, the
workload's runtime, TLB IPIs received and hypercalls issued; ``*_x`` are
native / Shoot4U.

``--host kvm`` adds, in the same run, the same in L2 guests under our KVM
in a kernel host (``puma_lab.kernel_host``: a 2-vCPU TCG guest that runs
KVM, so two 4-vCPU L2 guests overcommit it): native IPIs and Shoot4U in a
guest without KVM's PV TLB flush, then KVM's PV TLB flush (preempted
vCPUs skipped through steal time) and Shoot4U in a guest with it.
Figures ``kvm_*``; ``kvm_*_x_ipi`` and ``kvm_*_x_pvflush`` are the other
mode / Shoot4U in the same guests (``kvm_s4u-ipi_*``, ``kvm_s4u-pvflush_*``).
Then Hyper-V's enlightened flush, which KVM offers to guests that see a
Hyper-V (``hv-tlbflush``; Linux then takes Hyper-V as its hypervisor and
flushes remote TLBs with one hypercall, and KVM flushes the target vCPUs
itself, kicking those in guest mode and the others at their next entry,
as for Shoot4U): its rounds have no Shoot4U
half (Linux's Hyper-V flush does not go through the native flush that
shoot4u.ko hooks), so ``kvm_*_x_hvflush`` compare them with Shoot4U of
the ``ipi`` rounds of the same run (``kvm_s4u-ipi_*``).
"""

import argparse
import os
import shutil
import statistics
import sys

from puma_lab import errors
from puma_lab import kernel_host
from puma_lab import kmod
from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import vm


def parse(out):
    """The numeric key=value fields of tlbstorm's report."""
    fig = {}
    for k, _, v in (f.partition('=') for f in out.split() if '=' in f):
        try:
            fig[k] = float(v)
        except ValueError:
            pass
    return fig


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench shoot4u')
    ap.add_argument('--kernel', default='6.12', choices=paths.KERNELS)
    ap.add_argument('--ops', type=int, default=500)
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--vcpus', type=int, default=4)
    ap.add_argument('--host', default='tcg', choices=('tcg', 'kvm'),
                    help='kvm: also L2 guests under KVM in a kernel host')
    ap.add_argument('--kvm-modes', default=','.join(KVM_MODES),
                    help='the flush modes under KVM, of %s'
                    % ','.join(KVM_MODES))
    args = ap.parse_args(argv)
    args.kvm_modes = args.kvm_modes.split(',')
    bad = set(args.kvm_modes) - set(KVM_MODES)
    if bad or 'ipi' not in args.kvm_modes and 'hvflush' in args.kvm_modes:
        ap.error('--kvm-modes: of %s, with ipi where hvflush is (its '
                 'ratios are against Shoot4U of the ipi rounds)'
                 % ','.join(KVM_MODES))
    out = run_tcg(args)
    if args.host == 'kvm':
        out.update(run_kvm(args))
    return out


def run_tcg(args):
    res = {'ipi': [], 's4u': []}
    ipis = {'ipi': 0, 's4u': 0}
    with lab_mod.Lab('bench-shoot4u') as lab:
        share = lab.path('share')
        os.makedirs(share)
        built = kmod.build(paths.kernel(args.kernel), lab.path('build'))
        shutil.copy(os.path.join(built, 'shoot4u.ko'), share)
        busy = vm.Guest(lab, 'busy', kernel=args.kernel, vcpus=args.vcpus,
                        mem_mb=512).start()
        g = vm.Guest(lab, 'test', kernel=args.kernel, vcpus=args.vcpus,
                     mem_mb=768, cpu='max,kvm-shoot4u=on',
                     share=share).start()
        busy.wait_booted()
        g.wait_booted()
        busy.agent.spawn('exec stress-ng --cpu %d --timeout 0 --quiet'
                         % args.vcpus)
        for r in range(args.rounds):
            for mode in ('ipi', 's4u'):
                if mode == 's4u':
                    g.run('insmod /mnt/host/shoot4u.ko')
                before = g.tlb_ipis()
                out = g.run('tlbstorm -n %d' % args.ops, timeout=1800).out
                ipis[mode] += g.tlb_ipis() - before
                if mode == 's4u':
                    hyper = int(g.run('cat /sys/kernel/shoot4u/hypercalls'
                                      ).out)
                    g.run('rmmod shoot4u')
                # tlbstorm exits 2 on a stale mapping: g.run raised then.
                res[mode].append(parse(out))
                print('round %d %s: %s' % (r, mode, out.strip()),
                      file=sys.stderr)

    def med(mode, key):
        return round(statistics.median(f[key] for f in res[mode]), 1)

    out = {'kernel': args.kernel, 'vcpus': args.vcpus, 'ops': args.ops,
           'rounds': args.rounds}
    for mode in ('ipi', 's4u'):
        for key in ('p50_us', 'p90_us', 'p99_us', 'total_s'):
            out['%s_%s' % (mode, key)] = med(mode, key)
        out['%s_tlb_ipis' % mode] = ipis[mode]
    out['s4u_hypercalls_last_round'] = hyper
    out['p50_x'] = round(out['ipi_p50_us'] / out['s4u_p50_us'], 2)
    out['p99_x'] = round(out['ipi_p99_us'] / out['s4u_p99_us'], 2)
    out['runtime_x'] = round(out['ipi_total_s'] / out['s4u_total_s'], 2)
    return out


# The CPU model of the kernel-host tests (test_kernel_host.py) with and
# without KVM's PV TLB flush.
KVM_CPU = ('host,kvm-pv-ipi=off,kvm-pv-unhalt=off,kvm-pv-sched-yield=off,'
           'kvm-asyncpf-int=off,kvm-shoot4u=on,kvm-pv-tlb-flush=%s')
# Hyper-V's enlightened flush as KVM offers it: the hypercall interface
# (there with any hv-* feature), VP indexes (which Linux requires of a
# Hyper-V and the flush hypercalls name), the flush itself, and Hyper-V's
# clock (hv-time) and hv-relaxed as QEMU's docs recommend.  KVM's own
# signature is hidden (kvm=off): Linux takes the hypervisor whose CPUID
# leaves sit highest (arch/x86/kernel/cpu/hypervisor.c), and with hv-*
# QEMU moves KVM's to 0x40000100, above Hyper-V's at 0x40000000.
HV_CPU = 'host,kvm=off,hv-relaxed,hv-vpindex,hv-time,hv-tlbflush'
# What Linux prints once it uses Hyper-V's flush (hyperv_setup_mmu_ops).
HV_FLUSH_LINE = 'Using hypercall for remote TLB flush'
# Mode: (its CPU model, whether Shoot4U follows it in the same guest).
KVM_MODES = {
    'ipi': (KVM_CPU % 'off', True),
    'pvflush': (KVM_CPU % 'on', True),
    'hvflush': (HV_CPU, False),
}


def storm(g, ops, mode):
    before = g.tlb_ipis()
    out = g.run('tlbstorm -n %d' % ops, timeout=3600).out
    fig = parse(out)
    fig['tlb_ipis'] = g.tlb_ipis() - before
    print('kvm %s: %s ipis=%d' % (mode, out.strip(), fig['tlb_ipis']),
          file=sys.stderr)
    return fig


# A round lost to a machine fault (TCG's nested SVM, docs/lab.md) runs
# again in a new L2 guest, on a new kernel host if the old one is gone;
# a run gives up after this many faults.
MACHINE_FAULTS = 6


class KvmMachine:
    """A kernel host with our KVM and a busy L2 guest that hogs it."""

    def __init__(self, lab, args):
        self.args = args
        self.kh = kernel_host.KernelHost(lab, 'kh').start().wait_booted()
        self.kh.load_kvm(patched=True)
        self.share = os.path.join(self.kh.out_dir, 'share')
        os.makedirs(self.share)
        built = kmod.build(paths.kernel(args.kernel), lab.path('build'))
        shutil.copy(os.path.join(built, 'shoot4u.ko'), self.share)
        self.busy = None
        self.guests = 0

    def start_busy(self):
        self.guests += 1
        self.busy = kernel_host.NestedGuest(
            self.kh, 'busy-%d' % self.guests, kernel=self.args.kernel,
            vcpus=self.args.vcpus, mem_mb=256, cpu=KVM_CPU % 'off')
        self.busy.start().wait_booted()
        self.busy.agent.spawn('exec stress-ng --cpu %d --timeout 0 --quiet'
                              % self.args.vcpus)

    def ready(self):
        """Make the machine whole before a round.

        The busy guest; after a machine fault, a new kernel host or busy
        guest where one was lost.  Raises MachineFault if one happens
        meanwhile (e.g. while the busy guest boots): the caller counts it
        and calls this again.
        """
        try:
            lost = self.busy is not None and (
                not self.kh.healthy() or not self.busy.running() or
                self.busy.machine_fault())
            if lost:
                quietly(self.busy.stop)
                self.busy = None
            if not self.kh.healthy():
                self.kh.restart()
            if self.busy is None:
                self.start_busy()
        except kernel_host.MachineFault:
            raise
        except errors.LabError as e:
            # A command in a kernel host that went silent (2026-11-28: "still
            # running after 120s" in a new one) is a lost machine too.
            if self.kh.healthy():
                raise
            raise kernel_host.MachineFault(
                'kernel host %s lost while the machine was made ready: %s'
                % (self.kh.name, e)) from e

    def pair(self, base):
        """One round in a new test guest: BASE mode, then Shoot4U.

        Without a Shoot4U half for BASE (KVM_MODES) the second figures
        are None.
        """
        cpu, then_s4u = KVM_MODES[base]
        # A new name each time: a guest stopped after a fault may still
        # hold its pid file while it ends.
        self.guests += 1
        g = kernel_host.NestedGuest(
            self.kh, 'test-%s-%d' % (base, self.guests),
            kernel=self.args.kernel,
            vcpus=self.args.vcpus, mem_mb=384, share=self.share, cpu=cpu)
        try:
            g.start().wait_booted()
            if base == 'hvflush':
                check_hv_flush(g.run('dmesg').out)
            first = storm(g, self.args.ops, base)
            if not then_s4u:
                return first, None
            g.run('insmod /mnt/host/shoot4u.ko')
            return first, storm(g, self.args.ops, 's4u-' + base)
        finally:
            quietly(g.stop)

    def stop(self):
        if self.busy is not None:
            quietly(self.busy.stop)


def check_hv_flush(dmesg):
    """Raise unless DMESG says Linux flushes remote TLBs through Hyper-V.

    Figures of a guest that fell back to IPIs are not Hyper-V's.
    """
    if HV_FLUSH_LINE not in dmesg:
        lines = [line for line in dmesg.splitlines()
                 if 'Hyper-V' in line or 'Hypervisor detected' in line]
        raise errors.LabError('the hvflush guest does not use Hyper-V\'s '
                              'remote TLB flush (no "%s" in its dmesg): %s'
                              % (HV_FLUSH_LINE,
                                 '; '.join(lines) or 'no Hyper-V line'))


def quietly(stop):
    try:
        stop()
    except errors.LabError:
        pass  # a kernel host that stopped answering is made anew


def run_kvm(args):
    """Native IPIs, KVM's PV TLB flush and Shoot4U under our KVM.

    Each round boots a new test guest and runs the other mode, then
    Shoot4U in it; only rounds that completed both count, so that every
    ratio compares figures of the same guests (``hvflush`` excepted: see
    the module's docstring).  Machine faults are counted
    (``kvm_machine_faults``) and their rounds run again.
    """
    modes = args.kvm_modes
    res = {}
    for base in modes:
        res[base] = []
        if KVM_MODES[base][1]:
            res['s4u-' + base] = []
    faults = 0
    # $PUMA_LOGS keeps the consoles (the kernel host's and its guests').
    with lab_mod.Lab('bench-shoot4u-kvm',
                     keep_logs=os.environ.get('PUMA_LOGS')) as lab:
        m = KvmMachine(lab, args)
        try:
            for base in modes:
                while len(res[base]) < args.rounds:
                    try:
                        # A fault in ready() (a lost kernel host while
                        # the busy guest boots) is counted like one in
                        # the round, and the machine is made whole again.
                        m.ready()
                        first, s4u = m.pair(base)
                    except kernel_host.MachineFault as e:
                        faults += 1
                        print('kvm: machine fault %d: %s' % (faults, e),
                              file=sys.stderr)
                        if faults > MACHINE_FAULTS:
                            raise
                        continue
                    res[base].append(first)
                    if s4u is not None:
                        res['s4u-' + base].append(s4u)
        finally:
            m.stop()

    def med(mode, key):
        return round(statistics.median(f[key] for f in res[mode]), 1)

    out = {'kvm_machine_faults': faults}
    for mode in res:
        for key in ('p50_us', 'p99_us', 'total_s'):
            out['kvm_%s_%s' % (mode, key)] = med(mode, key)
            out['kvm_%s_%s_max' % (mode, key)] = round(
                max(f[key] for f in res[mode]), 1)
        out['kvm_%s_tlb_ipis' % mode] = sum(
            f['tlb_ipis'] for f in res[mode])
    # Each mode against Shoot4U in the same guests; Hyper-V's flush
    # against Shoot4U of the ipi rounds.
    for base in modes:
        s4u = 's4u-' + (base if KVM_MODES[base][1] else 'ipi')
        for key, name in (('p50_us', 'p50'), ('p99_us', 'p99'),
                          ('total_s', 'runtime')):
            out['kvm_%s_x_%s' % (name, base)] = round(
                out['kvm_%s_%s' % (base, key)] /
                out['kvm_%s_%s' % (s4u, key)], 2)
    return out
