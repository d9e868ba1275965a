# SPDX-License-Identifier: Apache-2.0
"""Which test profile runs: lean (the default, what CI runs) or full.

``PUMA_TEST_PROFILE=full ./lab/test`` runs every guest-module test on both
guest kernels.  The default, lean profile keeps the two-kernel runs where
a kernel's own code is what is tested (the read paths Puma rewrites, the
integrity torture, the module builds, the kernel-host tests) and runs the
tests of kernel-independent logic (the protocol, its peers and keys, the
module's policies) on one kernel each, alternating between the two, so
that each kernel still runs a share of them.  Likewise the split
migration tests that run through QEMU's monitor and through libvirt
(``DRIVERS``) run through both in the full profile and through one
each in the lean one.  README and docs/lab.md list what each profile
runs.
"""

import os

from puma_lab import paths

ENV = 'PUMA_TEST_PROFILE'
PROFILES = ('lean', 'full')
# How a split migration test drives it: QEMU's monitor, or libvirt.
DRIVERS = ('qmp', 'virsh')


def name():
    """The profile of this run; a clear error for a value it does not know."""
    value = os.environ.get(ENV) or 'lean'
    if value not in PROFILES:
        raise ValueError('%s=%s: the test profile is one of %s'
                         % (ENV, value, ', '.join(PROFILES)))
    return value


def kernels(lean):
    """The guest kernels of a test: both, or only LEAN in the lean profile."""
    if lean not in paths.KERNELS:
        raise ValueError('no guest kernel %s (one of %s)'
                         % (lean, ', '.join(paths.KERNELS)))
    return paths.KERNELS if name() == 'full' else (lean,)


def drivers(lean):
    """The split drivers of a test: both, or only LEAN in the lean profile.

    Each lean choice covers what the test is about: libvirt's part where
    the test checks libvirt (its states, events, rollback), QEMU's
    monitor where only QEMU's behaviour is under test.
    """
    if lean not in DRIVERS:
        raise ValueError('no split driver %s (one of %s)'
                         % (lean, ', '.join(DRIVERS)))
    return DRIVERS if name() == 'full' else (lean,)
