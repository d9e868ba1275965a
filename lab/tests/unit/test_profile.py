# SPDX-License-Identifier: Apache-2.0
"""The test profile: lean by default, full on request, nothing else."""

import pytest

from puma_lab import paths
from puma_lab import profile


def test_lean_by_default(monkeypatch):
    monkeypatch.delenv(profile.ENV, raising=False)
    assert profile.name() == 'lean'
    assert profile.kernels('6.1') == ('6.1',)
    assert profile.kernels('6.12') == ('6.12',)
    assert profile.drivers('qmp') == ('qmp',)
    assert profile.drivers('virsh') == ('virsh',)
    monkeypatch.setenv(profile.ENV, '')
    assert profile.name() == 'lean'


def test_full_runs_both_kernels_and_drivers(monkeypatch):
    monkeypatch.setenv(profile.ENV, 'full')
    assert profile.kernels('6.1') == paths.KERNELS
    assert profile.drivers('virsh') == profile.DRIVERS == ('qmp', 'virsh')


def test_bad_values_are_refused(monkeypatch):
    monkeypatch.setenv(profile.ENV, 'fast')
    with pytest.raises(ValueError, match='PUMA_TEST_PROFILE=fast: the '
                       'test profile is one of lean, full'):
        profile.kernels('6.1')
    monkeypatch.setenv(profile.ENV, 'full')
    with pytest.raises(ValueError, match='no guest kernel 5.10'):
        profile.kernels('5.10')
    with pytest.raises(ValueError, match='no split driver libxl'):
        profile.drivers('libxl')
