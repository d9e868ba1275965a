# SPDX-License-Identifier: Apache-2.0
"""Runs last: the session's cloud taken down, nothing is left behind."""

from puma_lab import cloud as cloud_mod
from puma_lab import lab as lab_mod


def test_nothing_left_behind(no_cloud):
    assert cloud_mod.find() is None
    assert lab_mod.leftovers() == []
