# SPDX-License-Identifier: Apache-2.0
"""The lab demo: live migration between two emulated hosts, verified;
split migration, cache lending, Shoot4U, and a split migration through
the lab cloud's ``openstack`` (puma_lab.demo_cloud)."""

import argparse
import sys
import time

from puma_lab.benches import shoot4u
from puma_lab import demo_cloud
from puma_lab import demo_puma
from puma_lab import errors
from puma_lab import host as host_mod
from puma_lab import lab as lab_mod
from puma_lab import memserver
from puma_lab import migration
from puma_lab import paths
from puma_lab import split

SPLIT_LIMIT_MB = 128
SPLIT_WSS_MB = 160


def split_demo(kernel):
    """Split migration A -> B, cold pages on C; False if it went wrong."""
    why = split.missing('virsh')
    driver = 'virsh'
    if why and not split.missing('qmp'):
        driver = 'qmp'
    elif why:
        # lab/setup builds our series: a stack without split is broken.
        print('split migration: FAILED, the stack cannot do it: %s' % why)
        return False
    with lab_mod.Lab('demo-split') as lab:
        a, b, c = split.make_hosts(lab, driver, ('a', 'b', 'c'))
        srv = memserver.MemoryServer(c).start()
        print('split migration: memory server on host c (%s)' % srv.uri)
        g = split.make_guest(driver, lab, a, 'split-vm', kernel=kernel,
                             mem_mb=512)
        pid = split.start_workload(g, SPLIT_WSS_MB, 32)
        how = ('virsh migrate --live --p2p --split' if driver == 'virsh'
               else 'QMP, capability x-split (libvirt lacks --split: %s)'
               % why)
        print('split-vm (512 MiB) rewrites and checks %d MiB; migrating it '
              'a -> b with a %d MiB limit on b (%s) ...'
              % (SPLIT_WSS_MB, SPLIT_LIMIT_MB, how))
        t0 = time.monotonic()
        g.migrate(b, [srv], SPLIT_LIMIT_MB << 20)
        print('migration took %.1f s; split-vm runs on host b'
              % (time.monotonic() - t0))
        split.walk(g, 2)
        st = g.qmp('x-query-split')
        print('x-query-split: state %s; pages resident %d, remote %d, '
              'unused %d; page-ins %d, page-outs %d, unused faults %d; '
              'fault latency p50 %d us, p99 %d us' % (
                  st['state'], st['resident-pages'], st['remote-pages'],
                  st['unused-pages'], st['page-ins'], st['page-outs'],
                  st['unused-faults'], st['fault-latency-p50-us'],
                  st['fault-latency-p99-us']))
        res = split.stop_workload(g, pid)
        print('verification: %s' % (res.out.strip() or res.err.strip()))
        ok = res.rc == 0 and 'corrupt=0' in res.out
        paged = st['page-ins'] > 0
        print('RESULT: %s' % (
            'OK, paged from host c, no corruption' if ok and paged else
            'FAILED: %s' % ('memory corrupt' if not ok else
                            'no page came from the memory server')))
        return ok and paged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--kernel', default='6.1', choices=paths.KERNELS)
    ap.add_argument('--mem', type=int, default=512, help='guest MiB')
    ap.add_argument('--no-cloud', action='store_true',
                    help='leave out the last part, a split migration '
                    'through the lab cloud\'s openstack')
    args = ap.parse_args(argv)

    print('Puma lab demo: QEMU %s, libvirt %s' % (
        paths.series_id('qemu'), paths.series_id('libvirt')))
    try:
        with lab_mod.Lab('demo') as lab:
            a = host_mod.Host(lab, 'a').start()
            b = host_mod.Host(lab, 'b').start()
            for h in (a, b):
                print('host %s: netns %s, address %s, libvirtd pid %d'
                      % (h.name, h.ns, h.addr, h.proc.pid))
            k = paths.kernel(args.kernel)
            migration.start_guest(a, 'demo-vm', kernel=args.kernel,
                                  mem_mb=args.mem, vcpus=2)
            print('guest demo-vm: kernel %s, %d MiB, 2 vCPUs (TCG), '
                  'running on host a' % (k.release, args.mem))
            print('migrating demo-vm a -> b (virsh migrate --live --p2p) '
                  'while memverify checks 64 MiB inside it ...')
            out = migration.migrate_verified(a, b, 'demo-vm')
            print('migration took %.1f s; guest now running on host b'
                  % out.migration_s)
            print('memverify rounds: %d before, %d after migration'
                  % (out.rounds_before, out.rounds_after))
            print('verification: %s' % (out.verify.out.strip() or
                                        out.verify.err.strip()))
            print('RESULT: %s' % ('OK, no corruption' if out.ok
                                  else 'FAILED'))
            if not out.ok:
                return 1
        if not split_demo(args.kernel):
            return 1
        if not demo_puma.run(args.kernel):
            return 1
        print('Shoot4U: a 4-vCPU guest (kvm-shoot4u=on) next to a busy one, '
              'TLB shootdowns with IPIs, then with shoot4u.ko ...')
        fig = shoot4u.run(['--kernel', args.kernel, '--ops', '200',
                           '--rounds', '1'])
        print('shootdown latency p50: %.0f us with IPIs, %.0f us with '
              'Shoot4U (x%.1f); p99 x%.1f' % (
                  fig['ipi_p50_us'], fig['s4u_p50_us'], fig['p50_x'],
                  fig['p99_x']))
        print('TLB IPIs received: %d with IPIs, %d with Shoot4U; %d '
              'hypercalls' % (fig['ipi_tlb_ipis'], fig['s4u_tlb_ipis'],
                              fig['s4u_hypercalls_last_round']))
        if not args.no_cloud and not demo_cloud.run():
            return 1
        return 0
    except errors.LabError as e:
        print('demo failed: %s' % e, file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
