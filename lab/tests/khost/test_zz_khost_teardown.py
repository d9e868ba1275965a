# SPDX-License-Identifier: Apache-2.0
"""Runs last: the kernel-host tests left nothing behind."""

from puma_lab import lab as lab_mod


def test_nothing_left_behind():
    assert lab_mod.leftovers() == []
