# SPDX-License-Identifier: Apache-2.0
"""lab/tests/conftest.py: a skip the allow-list does not know fails the run.

Each case runs pytest in a subprocess on a small test file, with
lab/tests/conftest.py loaded as a plugin (``-p conftest``) and the
environment the case sets (CI and PUMA_ALLOW_MISSING cleared otherwise).
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from puma_lab import paths

TESTS = os.path.join(paths.TOP, 'lab', 'tests')
sys.path.insert(0, TESTS)
import conftest  # noqa: E402 - lab/tests is put on the path just above

GUARD = 'unexpected skip(s): the run fails'


def run(tmp_path, source, **env):
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')
    (tmp_path / 'test_case.py').write_text(textwrap.dedent(source))
    environ = {k: v for k, v in os.environ.items()
               if k not in ('CI', conftest.ALLOW_MISSING)}
    environ.update(env)
    environ['PYTHONPATH'] = os.pathsep.join(
        [TESTS, os.path.join(paths.TOP, 'lab')])
    p = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'conftest', '-p',
         'no:cacheprovider', '-rfEs', str(tmp_path / 'test_case.py')],
        cwd=tmp_path, env=environ, capture_output=True, text=True,
        timeout=120)
    print(p.stdout, p.stderr)
    return p


def test_a_run_without_skips_passes(tmp_path):
    p = run(tmp_path, '''
        def test_fine():
            pass
    ''')
    assert p.returncode == 0
    assert GUARD not in p.stdout


@pytest.mark.parametrize('how', [
    'import pytest\ndef test_it():\n    pytest.skip("no frobnicator")\n',
    'import pytest\n@pytest.mark.skipif(True, reason="no frobnicator")\n'
    'def test_it():\n    pass\n',
    'import pytest\n@pytest.mark.skip(reason="no frobnicator")\n'
    'def test_it():\n    pass\n',
    'import pytest\n@pytest.fixture\ndef need():\n'
    '    pytest.skip("no frobnicator")\ndef test_it(need):\n    pass\n',
], ids=['call', 'skipif', 'skip-mark', 'fixture'])
def test_an_unknown_skip_fails_the_run(tmp_path, how):
    p = run(tmp_path, how + 'def test_fine():\n    pass\n')
    assert p.returncode == 1, p.stdout
    assert '1 passed, 1 skipped' in p.stdout
    assert '1 ' + GUARD in p.stdout
    assert 'UNEXPECTED SKIP test_case.py::test_it: no frobnicator' \
        in p.stdout


def test_a_skipped_module_fails_the_run(tmp_path):
    p = run(tmp_path, '''
        import pytest
        pytest.importorskip('no_such_module_puma')
    ''')
    assert p.returncode == 1, p.stdout
    assert "UNEXPECTED SKIP test_case.py: could not import " \
        "'no_such_module_puma'" in p.stdout


def test_an_xfail_fails_the_run(tmp_path):
    p = run(tmp_path, '''
        import pytest
        @pytest.mark.xfail(reason='known bug')
        def test_it():
            assert False
    ''')
    assert p.returncode == 1, p.stdout
    assert 'UNEXPECTED SKIP test_case.py::test_it: xfail: known bug' \
        in p.stdout


def test_a_failing_run_keeps_its_status(tmp_path):
    p = run(tmp_path, '''
        import pytest
        def test_it():
            pytest.skip('no frobnicator')
        def test_bad():
            assert False
    ''')
    assert p.returncode == 1
    assert GUARD in p.stdout


REQUIRE = '''
    def test_needs_frobnicator(require):
        require('the frobnicator', 'frob.ko is not built')

    def test_has_frobnicator(require):
        require('the frobnicator', None)
'''


def test_missing_part_of_our_stack_fails(tmp_path):
    p = run(tmp_path, REQUIRE)
    assert p.returncode == 1, p.stdout
    assert '1 failed, 1 passed' in p.stdout
    assert 'the frobnicator unavailable: frob.ko is not built' in p.stdout
    assert 'PUMA_ALLOW_MISSING=1 skips it outside CI' in p.stdout
    assert GUARD not in p.stdout


def test_allow_missing_turns_it_into_an_expected_skip(tmp_path):
    p = run(tmp_path, REQUIRE, PUMA_ALLOW_MISSING='1')
    assert p.returncode == 0, p.stdout
    assert '1 passed, 1 skipped' in p.stdout
    # Listed (-rs), but not held against the run.
    assert re.search(r'^SKIPPED \[1\] \S+: PUMA_ALLOW_MISSING=1: the '
                     r'frobnicator unavailable: frob.ko is not built$',
                     p.stdout, re.M), p.stdout
    assert GUARD not in p.stdout


@pytest.mark.parametrize('ci', ['true', 'True', '1'])
def test_ci_never_allows_missing(tmp_path, ci):
    p = run(tmp_path, REQUIRE, PUMA_ALLOW_MISSING='1', CI=ci)
    assert p.returncode == 1, p.stdout
    assert '1 failed, 1 passed' in p.stdout


def test_ci_refuses_a_skip_worded_as_allowed(tmp_path):
    p = run(tmp_path, '''
        import pytest
        def test_it():
            pytest.skip('PUMA_ALLOW_MISSING=1: the frobnicator unavailable')
    ''', PUMA_ALLOW_MISSING='1', CI='true')
    assert p.returncode == 1, p.stdout
    assert 'UNEXPECTED SKIP test_case.py::test_it: PUMA_ALLOW_MISSING=1: ' \
        in p.stdout


def test_only_the_value_1_allows_missing(tmp_path):
    p = run(tmp_path, REQUIRE, PUMA_ALLOW_MISSING='yes')
    assert p.returncode == 1, p.stdout
    assert '1 failed, 1 passed' in p.stdout


def test_every_expected_skip_says_why():
    assert conftest.EXPECTED_SKIPS
    for entry in conftest.EXPECTED_SKIPS:
        assert len(entry.why) > 40, entry
        assert callable(entry.allowed), entry
