# SPDX-License-Identifier: Apache-2.0
"""Shoot4U turned on the way operators do: a libvirt domain feature.

The patched libvirtd of an emulated host turns
``<features><kvm><pv-tlb-shootdown state='on'/></kvm></features>`` into
QEMU's ``kvm-shoot4u=on``; the guest module then routes its remote TLB
flushes through the hypercall.
"""

import json
import os
import shutil

from puma_lab import host as host_mod
from puma_lab import kmod
from puma_lab import migration
from puma_lab import paths

FEATURE = "<pv-tlb-shootdown state='%s'/>"


def share_module(lab, kernel):
    share = lab.path('share')
    os.makedirs(share, exist_ok=True)
    built = kmod.build(paths.kernel(kernel), lab.path('build'))
    shutil.copy(os.path.join(built, 'shoot4u.ko'), share)
    return share


def qemu_argv(host, name):
    """The command line libvirt gave QEMU, from the domain log."""
    log = os.path.join(host.dir, 'log', 'qemu', '%s.log' % name)
    with open(log) as f:
        return f.read()


def hypercalls_in_qemu(host, name):
    total = 0
    cpus = json.loads(host.virsh('qemu-monitor-command', name, '--cmd',
                                 '{"execute": "query-cpus-fast"}'))
    for cpu in cpus['return']:
        reply = json.loads(host.virsh(
            'qemu-monitor-command', name, '--cmd', json.dumps(
                {'execute': 'qom-get',
                 'arguments': {'path': cpu['qom-path'],
                               'property': 'x-shoot4u-hypercalls'}})))
        total += reply['return']
    return total


def tlb_ipis(ga):
    for line in ga.run('cat /proc/interrupts').out.splitlines():
        if line.strip().startswith('TLB:'):
            return sum(int(f) for f in line.split()[1:] if f.isdigit())
    raise AssertionError('no TLB line in /proc/interrupts')


def test_domain_feature_turns_shoot4u_on(lab):
    a = host_mod.Host(lab, 'a').start()
    share = share_module(lab, '6.12')
    ga = migration.start_guest(a, 'tlb', kernel='6.12', mem_mb=512,
                               vcpus=4, cpu='maximum', share=share,
                               kvm_features={'pv-tlb-shootdown': 'on'})
    assert FEATURE % 'on' in a.virsh('dumpxml', 'tlb')
    assert 'kvm-shoot4u=on' in qemu_argv(a, 'tlb')

    ga.run('insmod /mnt/host/shoot4u.ko')
    qemu0 = hypercalls_in_qemu(a, 'tlb')
    ipis0 = tlb_ipis(ga)
    out = ga.run('tlbstorm -n 200', timeout=600).out
    ipis = tlb_ipis(ga) - ipis0
    stats = ga.run('cat /sys/kernel/shoot4u/hypercalls '
                   '/sys/kernel/shoot4u/ipi_freed_tables').out.split()
    qemu1 = hypercalls_in_qemu(a, 'tlb')
    assert 'violations=0' in out, out
    assert int(stats[0]) >= 200
    assert qemu1 - qemu0 >= 200
    # Only flushes that free page tables keep their IPIs.
    assert ipis <= int(stats[1]) * 3, (ipis, stats)
    ga.run('rmmod shoot4u')
    dmesg = ga.run('dmesg').out
    for bad in ('BUG:', 'Oops', 'WARNING:', 'Call Trace'):
        assert bad not in dmesg, dmesg


def test_domain_feature_off_module_refuses(lab):
    a = host_mod.Host(lab, 'a').start()
    share = share_module(lab, '6.1')
    ga = migration.start_guest(a, 'plain', kernel='6.1', mem_mb=384,
                               vcpus=2, cpu='maximum', share=share,
                               kvm_features={'pv-tlb-shootdown': 'off'})
    assert FEATURE % 'off' in a.virsh('dumpxml', 'plain')
    # Off is QEMU's default: libvirt leaves the property out.
    assert 'kvm-shoot4u=on' not in qemu_argv(a, 'plain')
    res = ga.run('insmod /mnt/host/shoot4u.ko', check=False)
    assert res.rc != 0
    assert 'the hypervisor does not offer Shoot4U' in ga.run('dmesg').out
