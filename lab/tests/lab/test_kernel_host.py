# SPDX-License-Identifier: Apache-2.0
"""Kernel hosts: a TCG guest runs KVM, and lab guests boot under it.

The kernel host is the stock Debian 6.12 kernel under TCG with -cpu max;
Debian's kvm_amd must load with nested paging, and L2 guests with both
lab kernels must boot under KVM (not TCG: QEMU is started with
``-accel kvm`` only) with the lab's init, and KVM's own exit counter of
the kernel host must have counted them.

Then our KVM (the series, built by lab/setup kvm against the kernel's
headers) replaces Debian's in the same kernel host: Shoot4U runs for real
in L2 guests on both guest kernels, with four vCPUs on the kernel host's
two: remote TLB flushes become hypercalls that KVM's own statistics
count, the guest receives no TLB IPIs for them, and tlbstorm's checkers
see no stale translation.  Under Debian's KVM the same QEMU command line
gives the guest no Shoot4U (KVM does not offer the feature).
"""

import os
import shutil

import pytest

from puma_lab import kernel_host
from puma_lab import kmod
from puma_lab import lab as lab_mod
from puma_lab import paths

BAD_DMESG = ('BUG:', 'Oops', 'general protection', 'Call Trace')
# Without KVM's own PV TLB flush, so that the native baseline sends IPIs
# (benches compare the two); without PV IPIs, unhalt, sched yield and
# async PF interrupts, the model the SMP L2 boots of docs/lab.md used.
S4U_CPU = ('host,kvm-pv-tlb-flush=off,kvm-pv-ipi=off,kvm-pv-unhalt=off,'
           'kvm-pv-sched-yield=off,kvm-asyncpf-int=off,kvm-shoot4u=on')
OPS = 300
WORKLOAD = 'tlbstorm -n %d' % OPS


@pytest.fixture(scope='module')
def host():
    with lab_mod.Lab('kernel-host',
                     keep_logs=os.environ.get('PUMA_LOGS')) as lab:
        h = kernel_host.KernelHost(lab, 'kh').start().wait_booted()
        yield h.load_kvm()


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


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_l2_guest_boots_under_kvm(host, kernel):
    """An L2 guest under Debian's KVM; asked for Shoot4U, it has none."""
    assert not host.kvm_patched
    g = shoot4u_guest(host, kernel, vcpus=1)
    try:
        g.start().wait_booted()
        console = g.console()
        # KVM's debugfs sums over the VMs that exist: this one's exits.
        exits = host.kvm_stat('exits')
        res = g.run('insmod /mnt/host/shoot4u.ko', check=False)
        dmesg = g.run('dmesg').out
    finally:
        g.stop()
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


def test_kvm_selftest_pv_features(host):
    """KVM's kvm_pv_test, built from the patched tree, on our KVM.

    Its Shoot4U row: without the feature bit the hypercall is refused.
    """
    if not host.kvm_patched:
        host.load_kvm(patched=True)
    test = os.path.join(kernel_host.kvm_modules(), 'selftests',
                        'kvm_pv_test')
    p = host.chroot(test, timeout=600, check=False)
    out = p.out + p.err
    assert p.rc == 0, out
    assert 'testing hcall: KVM_HC_SHOOT4U (21300)' in out, out


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_shoot4u_under_our_kvm(host, kernel):
    if not host.kvm_patched:
        host.load_kvm(patched=True)
    # Four vCPUs on the kernel host's two.
    g = shoot4u_guest(host, kernel, vcpus=4)
    try:
        g.start().wait_booted()
        assert 'Hypervisor detected: KVM' in g.run('dmesg').out
        # Native first: the workload makes the guest send TLB IPIs.
        before = g.tlb_ipis()
        out = g.run(WORKLOAD, timeout=600).out
        native_ipis = g.tlb_ipis() - before
        assert 'violations=0' in out, out
        assert native_ipis >= OPS

        g.run('insmod /mnt/host/shoot4u.ko')
        kvm0, before = host.kvm_stat('shoot4u'), g.tlb_ipis()
        out = g.run(WORKLOAD, timeout=600).out
        s4u_ipis = g.tlb_ipis() - before
        kvm1 = host.kvm_stat('shoot4u')
        stats = dict(line.split(':', 1) for line in g.run(
            'cd /sys/kernel/shoot4u && grep . *').out.splitlines())
        dmesg = g.run('dmesg').out
    finally:
        g.stop()
    assert 'violations=0' in out, out
    # Every read-only flip is at least one remote flush: KVM counted a
    # hypercall for each, and the guest module agrees.
    assert kvm1 - kvm0 >= OPS, (kvm0, kvm1)
    assert int(stats['hypercall_errors']) == 0, stats
    # IPIs remain only for flushes that free page tables (GUP-fast rule).
    assert s4u_ipis <= int(stats['ipi_freed_tables']) * 3, \
        (s4u_ipis, stats, native_ipis)
    for bad in BAD_DMESG:
        assert bad not in dmesg, dmesg[-3000:]
    kh_dmesg = host.run('dmesg').out
    for bad in BAD_DMESG:
        assert bad not in kh_dmesg, kh_dmesg[-3000:]
