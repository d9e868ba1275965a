# SPDX-License-Identifier: Apache-2.0
"""The lab demo: live migration between two emulated hosts, verified."""

import argparse
import sys

from puma_lab.benches import shoot4u
from puma_lab import errors
from puma_lab import host as host_mod
from puma_lab import lab as lab_mod
from puma_lab import migration
from puma_lab import paths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--kernel', default='6.1', choices=paths.KERNELS)
    ap.add_argument('--mem', type=int, default=512, help='guest MiB')
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
        return 0
    except errors.LabError as e:
        print('demo failed: %s' % e, file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
