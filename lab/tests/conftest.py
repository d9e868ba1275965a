# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: a lab per test, torn down whatever the test did."""

import os
import re

import pytest

from puma_lab import lab as lab_mod


@pytest.fixture
def lab(request):
    """A fresh lab; its console/daemon logs are kept under $PUMA_LOGS."""
    logs = os.environ.get('PUMA_LOGS')
    # Kbuild breaks on commas in paths: keep names to a safe alphabet.
    name = re.sub(r'[^A-Za-z0-9_.-]+', '-', request.node.name).strip('-')
    with lab_mod.Lab(name, keep_logs=logs) as lab:
        yield lab
