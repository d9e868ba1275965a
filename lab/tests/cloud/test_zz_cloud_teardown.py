# SPDX-License-Identifier: Apache-2.0
"""Runs last: the lab cloud's tests left nothing behind."""

from puma_lab import cloud as cloud_mod
from puma_lab import lab as lab_mod


def test_nothing_left_behind():
    assert cloud_mod.find() is None
    assert lab_mod.leftovers() == []
