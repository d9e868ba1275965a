# SPDX-License-Identifier: Apache-2.0
"""Runs last: all the lab tests before it left nothing behind."""

from puma_lab import lab as lab_mod


def test_nothing_left_behind():
    assert lab_mod.leftovers() == []
