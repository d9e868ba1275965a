# SPDX-License-Identifier: Apache-2.0
"""Bad input gives one clear error in bounded time and leaves nothing."""

import subprocess

import pytest

from puma_lab import errors
from puma_lab import lab as lab_mod
from puma_lab import vm


def test_guest_without_root_disk_fails_clearly(lab):
    g = vm.Guest(lab, 'noroot', append='puma.root=/dev/vdz').start()
    # The initramfs's diagnosis read from the console, not the timeout
    # ("did not boot within 120s") ...
    with pytest.raises(errors.LabError,
                       match='(?s)boot failed.*root device /dev/vdz did not '
                             'appear'):
        g.wait_booted(timeout=120)
    # ... after which the guest powers itself off: QEMU ends, cleanly.
    try:
        rc = g.proc.wait(60)
    except subprocess.TimeoutExpired:
        pytest.fail('QEMU of a guest whose initramfs failed still runs: '
                    'no poweroff (status %s)'
                    % g.qmp('query-status')['status'])
    assert rc == 0, 'QEMU exited with %d after the poweroff' % rc


def test_guest_that_never_boots_times_out(lab):
    # -S: QEMU waits for "cont", so the guest never runs.
    g = vm.Guest(lab, 'frozen', extra_args=['-S']).start()
    with pytest.raises(errors.LabError, match='did not boot within 5s'):
        g.wait_booted(timeout=5)


def test_qemu_refusing_the_config_is_reported(lab):
    g = vm.Guest(lab, 'badarg', extra_args=['-device', 'no-such-device'])
    g.start()
    with pytest.raises(errors.LabError,
                       match="(?s)QEMU exited with 1.*no-such-device"):
        g.wait_booted(timeout=60)


def test_failed_test_leaves_nothing_behind():
    with pytest.raises(RuntimeError):
        with lab_mod.Lab('crash') as lab:
            vm.Guest(lab, 'doomed').start()
            raise RuntimeError('test body failed')
    assert lab_mod.leftovers() == []
