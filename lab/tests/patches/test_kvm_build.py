# SPDX-License-Identifier: Apache-2.0
"""The KVM series compiles into arch/x86/kvm of Debian's 6.12 source.

Lab machines have no usable hardware KVM, so this is a compile test: the
modules lab/setup built carry the series id and the new code.
"""

import os
import subprocess

import pytest

from puma_lab import paths


@pytest.mark.parametrize('module', ['kvm.ko', 'kvm-intel.ko', 'kvm-amd.ko'])
def test_kvm_modules_built_with_the_series(module):
    base = paths.built('linux')
    assert open(os.path.join(base, 'series-id')).read().strip() == \
        paths.checkout_series_id('kvm-patches')
    ko = os.path.join(base, 'prefix', module)
    info = subprocess.run(['modinfo', '-F', 'vermagic', ko],
                          capture_output=True, text=True, check=True).stdout
    # LOCALVERSION -puma-<id>, maybe followed by the scm '+'.
    assert '-%s' % paths.checkout_series_id('kvm-patches') in info


def test_kvm_has_the_shoot4u_hypercall():
    ko = os.path.join(paths.built('linux'), 'prefix', 'kvm.ko')
    syms = subprocess.run(['nm', ko], capture_output=True, text=True,
                          check=True).stdout
    assert ' T kvm_pv_shoot4u' in syms
