# SPDX-License-Identifier: Apache-2.0
"""Kernel hosts: a TCG guest runs KVM, and lab guests boot under it.

The kernel host is the stock Debian 6.12 kernel under TCG with -cpu max;
Debian's kvm_amd must load with nested paging, and an L2 guest must boot
under it (not TCG: QEMU is started with ``-accel kvm`` only) with the
lab's init, and KVM's own exit counter of the kernel host must have
counted it.  That guest runs the lab's 6.1 kernel: the 6.12 one boots
under our KVM below (the Shoot4U runs boot both kernels), which keeps the
env within its budget.

Then our KVM (the series, built by lab/setup kvm against the kernel's
headers) replaces Debian's in the same kernel host: Shoot4U runs for real
in L2 guests on both guest kernels, with four vCPUs on the kernel host's
two: remote TLB flushes become hypercalls that KVM's own statistics
count, the guest receives no TLB IPIs for them, and tlbstorm's checkers
see no stale translation.  Under Debian's KVM the same QEMU command line
gives the guest no Shoot4U (KVM does not offer the feature).

TCG's emulation of nested SVM sometimes loses the machine under an SMP L2
guest that sends many IPIs (a kernel host's triple fault, an L2 guest's
silent reset; seen under Debian's KVM as under ours, docs/lab.md), and
once while a 1-vCPU L2 guest booted; a 4-vCPU L2 boot has also stopped
silently.  An L2 boot or a Shoot4U run that loses its machine that way
is made again on a new one (at most MACHINE_ATTEMPTS in all, begun
within RETRY_WITHIN seconds), with a warning that names the fault; a test
that finds the kernel host gone (an earlier test failed with it) gets a
new one, with a warning, instead of failing for the earlier one.

These tests have a tox env of their own (khost), which lab/test runs
alone: TCG's nested SVM takes both cores.
"""

import os
import shutil
import time
import warnings

import pytest

from puma_lab import errors
from puma_lab import kernel_host
from puma_lab import kmod
from puma_lab import lab as lab_mod
from puma_lab import paths
from puma_lab import profile

BAD_DMESG = ('BUG:', 'Oops', 'general protection', 'Call Trace')
# Without KVM's own PV TLB flush, so that the native baseline sends IPIs
# (benches compare the two); without PV IPIs, unhalt, sched yield and
# async PF interrupts, the model the SMP L2 boots of docs/lab.md used.
S4U_CPU = ('host,kvm-pv-tlb-flush=off,kvm-pv-ipi=off,kvm-pv-unhalt=off,'
           'kvm-pv-sched-yield=off,kvm-asyncpf-int=off,kvm-shoot4u=on')
OPS = 300
WORKLOAD = 'tlbstorm -n %d' % OPS
# Tries of a run on machines that fail under it (MachineFault); a new try
# begins only within RETRY_WITHIN seconds of the first, so that the last
# one (at most a 300 s boot and both tlbstorm runs) ends within pytest's
# timeout (1200 s, tox.ini).
MACHINE_ATTEMPTS = 5
RETRY_WITHIN = 660
# No new try once the env has run this long: a kernel host that keeps
# failing (the project's CI of 2026-11-28 spent over 20 minutes in this
# env and ran out of its time) fails its test instead of taking the
# whole run's time.  Without faults the env takes 6 to 8 minutes; the
# project's CI of 2026-11-29 (a slower machine) reached a 6.12 fault at
# 1066 s and failed it untried under a 900 s budget.
ENV_RETRY_BUDGET = 1200
# KVM's selftests here take seconds each (hyperv_tlb_flush, the longest,
# 8.8 s on 2026-11-29).
SELFTEST_TIMEOUT = 180
ENV_START = time.monotonic()


@pytest.fixture(scope='module')
def machine():
    with lab_mod.Lab('kernel-host',
                     keep_logs=os.environ.get('PUMA_LOGS')) as lab:
        h = kernel_host.KernelHost(lab, 'kh').start().wait_booted()
        yield h.load_kvm()


@pytest.fixture
def host(machine):
    """The module's kernel host; a new one if an earlier test lost it."""
    if not machine.healthy():
        warnings.warn('the kernel host was lost before this test (see the '
                      'failed test before it): a new one')
        machine.restart()
    return machine


def test_kernel_host_runs_kvm(host):
    assert host.run('uname -r').out.strip() == paths.kernel('6.12').release
    flags = host.run('grep -m1 ^flags /proc/cpuinfo').out.split()
    assert 'svm' in flags and 'npt' in flags, flags
    assert host.run('grep -c "^kvm_amd " /proc/modules').out.strip() == '1'
    # The share is read-only: a kernel host cannot write the host.
    p = host.run('touch /mnt/host/etc/puma-kernel-host-write', check=False)
    assert p.rc != 0


def shoot4u_guest(host, kernel, vcpus):
    share = os.path.join(host.out_dir, 'share-' + kernel)
    if not os.path.exists(os.path.join(share, 'shoot4u.ko')):
        os.makedirs(share, exist_ok=True)
        built = kmod.build(paths.kernel(kernel), host.lab.path('build'))
        shutil.copy(os.path.join(built, 'shoot4u.ko'), share)
    return kernel_host.NestedGuest(
        host, 's4u-%s-%s' % (kernel.replace('.', ''), vcpus), kernel=kernel,
        mem_mb=384, vcpus=vcpus, share=share, cpu=S4U_CPU)


def boot_run(host, kernel):
    """A 1-vCPU L2 guest boots; it tries to load shoot4u.ko."""
    g = shoot4u_guest(host, kernel, vcpus=1)
    try:
        g.start().wait_booted()
        console = g.console()
        # KVM's debugfs sums over the VMs that exist: this one's exits.
        exits = host.kvm_stat('exits')
        res = g.run('insmod /mnt/host/shoot4u.ko', check=False)
        dmesg = g.run('dmesg').out
    except kernel_host.MachineFault:
        lost(g)
        raise
    except BaseException:
        g.stop()
        raise
    g.stop()
    return console, exits, res, dmesg


@pytest.mark.parametrize('kernel', ['6.1'])
def test_l2_guest_boots_under_kvm(host, kernel):
    """An L2 guest under Debian's KVM; asked for Shoot4U, it has none."""
    assert not host.kvm_patched
    console, exits, res, dmesg = on_a_machine_that_holds(host, boot_run,
                                                         kernel)
    release = paths.kernel(kernel).release
    assert 'puma-guest: ready %s' % release in console, console[-2000:]
    assert 'Hypervisor detected: KVM' in console, console[-2000:]
    assert exits > 0
    # Debian's KVM does not offer the feature QEMU was asked for.
    assert res.rc != 0
    assert 'the hypervisor does not offer Shoot4U' in dmesg
    kh_dmesg = host.run('dmesg').out
    for bad in BAD_DMESG:
        assert bad not in kh_dmesg, kh_dmesg[-3000:]


def test_our_kvm_loads_into_the_stock_kernel(host):
    host.load_kvm(patched=True)
    # Out of tree (O) and unsigned (E), as docs/lab.md says.
    assert set(host.kvm_taint()) == {'O', 'E'}, host.kvm_taint()
    assert host.run('grep -c "^kvm_amd " /proc/modules').out.strip() == '1'
    # KVM's statistics have the Shoot4U counter: our code runs.
    assert host.kvm_stat('shoot4u') == 0


def test_kvm_selftests_of_shoot4u(host):
    """KVM's kvm_pv_test and shoot4u_test, built from the patched tree.

    kvm_pv_test's Shoot4U row: without the feature bit the hypercall is
    refused.  shoot4u_test: with it, what the ABI accepts and refuses.
    """
    if not host.kvm_patched:
        host.load_kvm(patched=True)
    test = os.path.join(kernel_host.kvm_modules(), 'selftests',
                        'kvm_pv_test')
    # Each takes seconds (2026-11-29: both in 1.4 s): a hang is not
    # waited out for ten minutes.
    p = host.chroot(test, timeout=SELFTEST_TIMEOUT, check=False)
    out = p.out + p.err
    assert p.rc == 0, out
    assert 'testing hcall: KVM_HC_SHOOT4U (13)' in out, out
    # With the feature: accepted, refused (flags, reserved) and counted.
    p = host.chroot(test.replace('kvm_pv_test', 'shoot4u_test'),
                    timeout=SELFTEST_TIMEOUT, check=False)
    out = p.out + p.err
    assert p.rc == 0, out
    assert 'KVM_HC_SHOOT4U (13): 3 calls accepted, 3 refused' in out, out


def shoot4u_run(host, kernel):
    """tlbstorm natively, then with Shoot4U, in one 4-vCPU L2 guest.

    Four vCPUs on the kernel host's two.  Returns what the test checks.
    """
    g = shoot4u_guest(host, kernel, vcpus=4)
    r = {}
    try:
        g.start().wait_booted()
        r['hypervisor'] = 'Hypervisor detected: KVM' in g.run('dmesg').out
        # Native first: the workload makes the guest send TLB IPIs.
        before = g.tlb_ipis()
        r['native_out'] = g.run(WORKLOAD, timeout=600).out
        r['native_ipis'] = g.tlb_ipis() - before

        g.run('insmod /mnt/host/shoot4u.ko')
        kvm0, before = host.kvm_stat('shoot4u'), g.tlb_ipis()
        r['out'] = g.run(WORKLOAD, timeout=600).out
        r['s4u_ipis'] = g.tlb_ipis() - before
        r['hypercalls'] = host.kvm_stat('shoot4u') - kvm0
        # What puma-exporter reads under KVM: KVM's shoot4u statistic of
        # each vCPU, through QEMU's query-stats (docs/metrics.md).
        r['qmp_stats'] = g.qmp('query-stats', target='vcpu', providers=[
            {'provider': 'kvm', 'names': ['shoot4u']}])
        r['stats'] = dict(line.split(':', 1) for line in g.run(
            'cd /sys/kernel/shoot4u && grep . *').out.splitlines())
        r['dmesg'] = g.run('dmesg').out
    except kernel_host.MachineFault:
        lost(g)
        raise
    except BaseException:
        g.stop()
        raise
    g.stop()
    return r


def lost(g):
    """After a MachineFault: keep G's console with the logs, stop G."""
    if os.path.exists(g.console_path):
        os.rename(g.console_path, '%s.failed-%d'
                  % (g.console_path, time.time()))
    try:
        g.stop()
    except errors.LabError:
        pass  # a kernel host that does not answer is made anew


def on_a_machine_that_holds(host, run, *args):
    """RUN(host, *ARGS), again on a new machine after a MachineFault.

    A machine fault is a silent reset: a guest that dies on its own (a
    panic, an oops, a BUG) or a wrong result is never retried, and a
    missed Shoot4U flush shows as tlbstorm violations or an oops, not as
    a reset (it touches user mappings only).  The faults are TCG's
    (docs/lab.md); each one is a warning in the test report.
    """
    start = time.monotonic()
    for attempt in range(1, MACHINE_ATTEMPTS + 1):
        try:
            return run(host, *args)
        except kernel_host.MachineFault as e:
            if attempt == MACHINE_ATTEMPTS or \
                    time.monotonic() - start > RETRY_WITHIN:
                raise
            if time.monotonic() - ENV_START > ENV_RETRY_BUDGET:
                raise kernel_host.MachineFault(
                    'not tried again: the kernel-host tests have run %d s '
                    '(more than %d s); %s' % (
                        time.monotonic() - ENV_START, ENV_RETRY_BUDGET,
                        e)) from e
            warnings.warn('machine fault %d of at most %d, once more on a '
                          'new machine: %s'
                          % (attempt, MACHINE_ATTEMPTS - 1, e))
            if not host.healthy():
                host.restart()


# What runs here is the kernel host's KVM (the same kernel whatever the
# guest's); the guest module's own code runs on both guest kernels in the
# TCG tests (lab/tests/lab/test_shoot4u.py), and 6.1 boots as an L2 guest
# above: the lean profile runs this on 6.12, the full one on both.
@pytest.mark.parametrize('kernel', profile.kernels('6.12'))
def test_shoot4u_under_our_kvm(host, kernel):
    if not host.kvm_patched:
        host.load_kvm(patched=True)
    r = on_a_machine_that_holds(host, shoot4u_run, kernel)
    assert r['hypervisor'], r
    assert 'violations=0' in r['native_out'], r['native_out']
    assert r['native_ipis'] >= OPS, r
    out, stats, dmesg = r['out'], r['stats'], r['dmesg']
    s4u_ipis, native_ipis = r['s4u_ipis'], r['native_ipis']
    assert 'violations=0' in out, out
    # Every read-only flip is at least one remote flush: KVM counted a
    # hypercall for each, and the guest module agrees.
    assert r['hypercalls'] >= OPS, r['hypercalls']
    assert int(stats['hypercall_errors']) == 0, stats
    # QEMU's query-stats shows the counter of each of the 4 vCPUs; read
    # after KVM's debugfs sum, it holds at least as many.
    per_vcpu = [s['value'] for res in r['qmp_stats'] for s in res['stats']
                if s['name'] == 'shoot4u']
    assert len(per_vcpu) == 4, r['qmp_stats']
    assert sum(per_vcpu) >= r['hypercalls'], (per_vcpu, r['hypercalls'])
    # IPIs remain only for flushes that free page tables (GUP-fast rule).
    assert s4u_ipis <= int(stats['ipi_freed_tables']) * 3, \
        (s4u_ipis, stats, native_ipis)
    for bad in BAD_DMESG:
        assert bad not in dmesg, dmesg[-3000:]
    kh_dmesg = host.run('dmesg').out
    for bad in BAD_DMESG:
        assert bad not in kh_dmesg, kh_dmesg[-3000:]


# Upstream's KVM selftests of what the KVM series touches (built from the
# patched tree by lab/setup kvm): CPUID, the hypercall instructions, the
# APIC map that the hypercall reads, IPIs, and Hyper-V's remote TLB
# flushes (which share kvm_make_vcpus_request_mask() with it).  They run
# last: twice on 2026-11-28 the kernel host panicked ("corrupted stack
# end detected inside scheduler") in a Shoot4U run that came after them
# in the same kernel host, never before they were added (cause open).
UPSTREAM_SELFTESTS = ('cpuid_test', 'fix_hypercall_test',
                      'recalc_apic_map_test', 'xapic_ipi_test',
                      'hyperv_tlb_flush')


@pytest.mark.parametrize('test', UPSTREAM_SELFTESTS)
def test_kvm_selftests_of_what_the_series_touches(host, test):
    """Each passes under our KVM; a skip (exit 4) is a failure here."""
    if not host.kvm_patched:
        host.load_kvm(patched=True)
    path = os.path.join(kernel_host.kvm_modules(), 'selftests', test)
    # A kernel host that stalls under the selftest is lost, not failed.
    p = on_a_machine_that_holds(host, lambda h: h.chroot(
        path, timeout=SELFTEST_TIMEOUT, check=False))
    out = p.out + p.err
    print(out[-2000:])
    assert p.rc == 0, out[-3000:]
