# SPDX-License-Identifier: Apache-2.0
"""Lab numbers are claimed atomically; another lab's files are never hit."""

import os

from puma_lab import lab as lab_mod
from puma_lab import netns
from puma_lab import paths


def test_claim_skips_existing_run_dirs(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, 'RUN', str(tmp_path))
    monkeypatch.setattr(netns, 'names', lambda: ['puma-2', 'puma-5-a'])
    (tmp_path / '1').mkdir()
    (tmp_path / '1' / 'Makefile').write_text('another lab tearing down')
    assert lab_mod._claim_num() == 3
    assert lab_mod._claim_num() == 4
    assert lab_mod._claim_num() == 6
    assert sorted(os.listdir(tmp_path)) == ['1', '3', '4', '6']
    assert (tmp_path / '1' / 'Makefile').read_text() == \
        'another lab tearing down'
