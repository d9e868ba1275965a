# SPDX-License-Identifier: Apache-2.0
"""lab/lib/*.sh helpers: series ids, patch lists and clear errors."""

import os
import subprocess

from puma_lab import paths

LIB = os.path.join(paths.TOP, 'lab', 'lib')


def sh(script, **env):
    full = '. %s/common.sh; . %s/kernels.sh; %s' % (LIB, LIB, script)
    return subprocess.run(['bash', '-c', full], capture_output=True,
                          text=True, env=dict(os.environ, **env))


def test_series_id_of_empty_series_is_empty(tmp_path):
    (tmp_path / 'series').write_text('# nothing yet\n\n')
    assert sh('series_id %s' % tmp_path).stdout.strip() == 'empty'


def test_series_id_changes_with_patch_content(tmp_path):
    (tmp_path / 'series').write_text('0001-a.patch\n')
    patch = tmp_path / '0001-a.patch'
    patch.write_text('one\n')
    first = sh('series_id %s' % tmp_path).stdout.strip()
    patch.write_text('two\n')
    second = sh('series_id %s' % tmp_path).stdout.strip()
    assert first != second and len(first) == 10 and first != 'empty'


def test_series_naming_a_missing_patch_is_an_error(tmp_path):
    (tmp_path / 'series').write_text('0001-missing.patch\n')
    p = sh('series_patches %s' % tmp_path)
    assert p.returncode == 1
    assert 'names 0001-missing.patch, which does not exist' in p.stderr


def test_unknown_kernel_name():
    p = sh('check_kernel_name 4.19')
    assert p.returncode == 1
    assert "unknown guest kernel '4.19' (known: 6.1 6.12)" in p.stderr


def test_missing_command_is_named():
    p = sh('require_cmd sh no-such-tool-puma')
    assert p.returncode == 1
    assert 'missing command(s): no-such-tool-puma' in p.stderr
