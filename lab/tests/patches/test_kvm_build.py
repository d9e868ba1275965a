# SPDX-License-Identifier: Apache-2.0
"""The KVM series builds into modules for the kernel hosts' kernel.

lab/setup kvm builds arch/x86/kvm of the Debian source of the lab's 6.12
guest kernel, with our series, out of tree against that kernel's headers:
the modules must carry its exact vermagic (or a kernel host refuses them)
and the new code.  test_kernel_host.py loads and runs them.
"""

import os
import subprocess

import pytest

from puma_lab import paths


def modinfo(field, ko):
    return subprocess.run(['modinfo', '-F', field, ko], capture_output=True,
                          text=True, check=True).stdout.strip()


def stock(module):
    kernel = paths.kernel('6.12')
    tree = os.path.join(kernel.root, 'lib', 'modules', kernel.release,
                        'kernel', 'arch', 'x86', 'kvm')
    for name in os.listdir(tree):
        if name.split('.ko')[0] == module[:-3]:
            return os.path.join(tree, name)
    raise AssertionError('no stock %s in %s' % (module, tree))


@pytest.mark.parametrize('module', ['kvm.ko', 'kvm-intel.ko', 'kvm-amd.ko'])
def test_kvm_modules_built_with_the_series(module):
    base = paths.built('linux')
    assert open(os.path.join(base, 'series-id')).read().strip() == \
        paths.checkout_series_id('kvm-patches')
    ko = os.path.join(base, 'prefix', module)
    assert modinfo('vermagic', ko) == modinfo('vermagic', stock(module))
    with open(os.path.join(base, 'prefix', 'release')) as f:
        assert f.read().strip() == paths.kernel('6.12').release


def test_kvm_has_the_shoot4u_hypercall():
    ko = os.path.join(paths.built('linux'), 'prefix', 'kvm.ko')
    syms = subprocess.run(['nm', ko], capture_output=True, text=True,
                          check=True).stdout
    assert ' T kvm_pv_shoot4u' in syms


def test_kvm_selftest_has_the_shoot4u_row():
    test = os.path.join(paths.built('linux'), 'prefix', 'selftests',
                        'kvm_pv_test')
    with open(test, 'rb') as f:
        assert b'KVM_HC_SHOOT4U' in f.read()


def test_kvm_selftest_of_shoot4u_is_built():
    test = os.path.join(paths.built('linux'), 'prefix', 'selftests',
                        'shoot4u_test')
    assert os.access(test, os.X_OK), test


def test_ksm_series_applies_to_the_kernel_source(tmp_path):
    """ksm-patches/ applies to Debian's tree of the lab's 6.12 kernel.

    The full profile builds it (lab/setup khost); this checks, without a
    build, that the series still applies to the first commit of the KVM
    build's source tree (Debian's, unpatched), in an index of its own.
    """
    src = os.path.join(paths.built('linux'), 'src')
    env = dict(os.environ, GIT_INDEX_FILE=str(tmp_path / 'index'))

    def git(*args):
        return subprocess.run(['git', '-C', src] + list(args), env=env,
                              capture_output=True, text=True)

    base = git('rev-list', '--max-parents=0', 'HEAD').stdout.split()
    assert len(base) == 1, base
    assert git('read-tree', base[0]).returncode == 0
    series = os.path.join(paths.TOP, 'ksm-patches')
    with open(os.path.join(series, 'series')) as f:
        patches = [os.path.join(series, ln.strip()) for ln in f
                   if ln.strip() and not ln.startswith('#')]
    assert patches
    for patch in patches:
        p = git('apply', '--cached', patch)
        assert p.returncode == 0, (patch, p.stderr)
