# SPDX-License-Identifier: Apache-2.0
"""The lab demo: live migration between two emulated hosts, verified."""

import argparse
import sys

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
            return 0 if out.ok else 1
    except errors.LabError as e:
        print('demo failed: %s' % e, file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
