# SPDX-License-Identifier: Apache-2.0
"""Kernel hosts: a TCG guest runs KVM, and lab guests boot under it.

The kernel host is the stock Debian 6.12 kernel under TCG with -cpu max;
Debian's kvm_amd must load with nested paging, and L2 guests with both
lab kernels must boot under KVM (not TCG: QEMU is started with
``-accel kvm`` only) with the lab's init, and KVM's own exit counter of
the kernel host must have counted them.
"""

import pytest

from puma_lab import kernel_host
from puma_lab import lab as lab_mod
from puma_lab import paths

BAD_DMESG = ('BUG:', 'Oops', 'general protection', 'Call Trace')


@pytest.fixture(scope='module')
def host():
    with lab_mod.Lab('kernel-host') as lab:
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


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_l2_guest_boots_under_kvm(host, kernel):
    g = kernel_host.NestedGuest(host, 'l2-' + kernel.replace('.', ''),
                                kernel=kernel)
    try:
        g.start().wait_booted()
        console = g.console()
        # KVM's debugfs sums over the VMs that exist: this one's exits.
        exits = host.kvm_stat('exits')
    finally:
        g.stop()
    release = paths.kernel(kernel).release
    assert 'puma-guest: ready %s' % release in console, console[-2000:]
    assert 'Hypervisor detected: KVM' in console, console[-2000:]
    assert exits > 0
    dmesg = host.run('dmesg').out
    for bad in BAD_DMESG:
        assert bad not in dmesg, dmesg[-3000:]
