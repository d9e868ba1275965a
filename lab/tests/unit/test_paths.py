# SPDX-License-Identifier: Apache-2.0
"""Bad input to the lab gets one clear error."""

import pytest

from puma_lab import errors
from puma_lab import paths


def test_unknown_kernel_is_named():
    with pytest.raises(errors.LabError, match=r"unknown guest kernel '5\.10'"
                       r" \(known: 6\.1, 6\.12\)"):
        paths.kernel('5.10')


def test_missing_build_says_how_to_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, 'CACHE', str(tmp_path))
    with pytest.raises(errors.LabError, match='run lab/setup stack'):
        paths.qemu_prefix()
    with pytest.raises(errors.LabError, match='run lab/setup kernels'):
        paths.kernel('6.1')
