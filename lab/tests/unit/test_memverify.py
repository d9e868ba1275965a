# SPDX-License-Identifier: Apache-2.0
"""The in-guest checker catches a single flipped bit (run on the host)."""

import os
import subprocess

from puma_lab import paths

SRC = os.path.join(paths.TOP, 'lab', 'guest', 'memverify.c')


def _build(tmp_path):
    exe = str(tmp_path / 'memverify')
    subprocess.run(['gcc', '-O2', '-Wall', '-Werror', '-o', exe, SRC],
                   check=True)
    return exe


def test_clean_run_passes(tmp_path):
    exe = _build(tmp_path)
    prog = tmp_path / 'progress'
    p = subprocess.run([exe, '-m', '4', '-t', '0.5', '-p', str(prog)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'corrupt=0' in p.stdout
    assert prog.read_text().startswith('state=ok ')


def test_flipped_bit_is_caught(tmp_path):
    exe = _build(tmp_path)
    p = subprocess.run([exe, '-m', '4', '-t', '5', '-x'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert 'CORRUPT page=512 ' in p.stdout


def test_bad_size_is_refused(tmp_path):
    exe = _build(tmp_path)
    p = subprocess.run([exe, '-m', '0'], capture_output=True, text=True)
    assert p.returncode == 1
    assert 'region size must be > 0' in p.stderr
