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
    args = ap.parse_args(argv)
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

    def pair(self, pv, base):
        """One round in a new test guest: BASE mode, then Shoot4U."""
        # A new name each time: a guest stopped after a fault may still
        # hold its pid file while it ends.
        self.guests += 1
        g = kernel_host.NestedGuest(
            self.kh, 'test-pv%s-%d' % (pv, self.guests),
            kernel=self.args.kernel,
            vcpus=self.args.vcpus, mem_mb=384, share=self.share,
            cpu=KVM_CPU % pv)
        try:
            g.start().wait_booted()
            first = storm(g, self.args.ops, base)
            g.run('insmod /mnt/host/shoot4u.ko')
            return first, storm(g, self.args.ops, 's4u-' + base)
        finally:
            quietly(g.stop)

    def stop(self):
        if self.busy is not None:
            quietly(self.busy.stop)


def quietly(stop):
    try:
        stop()
    except errors.LabError:
        pass  # a kernel host that stopped answering is made anew


def run_kvm(args):
    """Native IPIs, KVM's PV TLB flush and Shoot4U under our KVM.

    Each round boots a new test guest and runs the other mode, then
    Shoot4U in it; only rounds that completed both count, so that every
    ratio compares figures of the same guests.  Machine faults are
    counted (``kvm_machine_faults``) and their rounds run again.
    """
    res = {'ipi': [], 'pvflush': [], 's4u-ipi': [], 's4u-pvflush': []}
    faults = 0
    # $PUMA_LOGS keeps the consoles (the kernel host's and its guests').
    with lab_mod.Lab('bench-shoot4u-kvm',
                     keep_logs=os.environ.get('PUMA_LOGS')) as lab:
        m = KvmMachine(lab, args)
        try:
            for pv, base in (('off', 'ipi'), ('on', 'pvflush')):
                while len(res[base]) < args.rounds:
                    try:
                        # A fault in ready() (a lost kernel host while
                        # the busy guest boots) is counted like one in
                        # the round, and the machine is made whole again.
                        m.ready()
                        first, s4u = m.pair(pv, base)
                    except kernel_host.MachineFault as e:
                        faults += 1
                        print('kvm: machine fault %d: %s' % (faults, e),
                              file=sys.stderr)
                        if faults > MACHINE_FAULTS:
                            raise
                        continue
                    res[base].append(first)
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
    # Each mode against Shoot4U in the same guests.
    for base in ('ipi', 'pvflush'):
        for key, name in (('p50_us', 'p50'), ('p99_us', 'p99'),
                          ('total_s', 'runtime')):
            out['kvm_%s_x_%s' % (name, base)] = round(
                out['kvm_%s_%s' % (base, key)] /
                out['kvm_s4u-%s_%s' % (base, key)], 2)
    return out
