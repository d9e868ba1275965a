# SPDX-License-Identifier: Apache-2.0
"""guest-kmod/tools/puma-pairs against a pumactl that records its calls.

The guest side of the pairs the compute host pushes: every line checked
before anything changes, the role derived from the pairs, unchanged pairs
left alone, gone or re-keyed pairs removed, keys never in the state file.
The real module runs it in the cloud test (lab/tests/cloud).
"""

import os
import subprocess

import pytest

TOOL = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                    'guest-kmod', 'tools', 'puma-pairs')
KEY1 = 'a' * 32
KEY2 = 'b' * 32


@pytest.fixture
def guest(tmp_path):
    sysfs = tmp_path / 'sys'
    sysfs.mkdir()
    (sysfs / 'role').write_text('off\n')
    log = tmp_path / 'calls'
    fake = tmp_path / 'pumactl'
    fake.write_text('#!/bin/sh\necho "$*" >>%s\n'
                    '[ "$1" = role ] && echo "$2" >%s/role\n'
                    '[ "$1 $2" = "peer add" ] && [ -n "${FAIL_ADD-}" ] '
                    '&& exit 1\nexit 0\n' % (log, sysfs))
    fake.chmod(0o755)
    env = dict(os.environ, PUMACTL=str(fake), PUMA_SYSFS=str(sysfs),
               PUMA_PAIRS_STATE=str(tmp_path / 'state'))

    def run(text, **extra):
        if log.exists():
            log.unlink()
        p = subprocess.run(['sh', TOOL], input=text, text=True,
                           capture_output=True, env=dict(env, **extra))
        calls = log.read_text().splitlines() if log.exists() else []
        return p, calls
    run.state = tmp_path / 'state'
    run.sysfs = sysfs
    return run


def test_pairs_role_and_nothing_redone(guest):
    p, calls = guest('lend 10.0.0.2 %s\nborrow 10.0.0.3 7400 %s\n'
                     % (KEY1, KEY2))
    assert p.returncode == 0, p.stderr
    assert calls == ['role both', 'peer del 10.0.0.3:7400',
                     'peer add 10.0.0.3:7400 ' + KEY2,
                     'borrower add 10.0.0.2 ' + KEY1]
    assert KEY1 not in guest.state.read_text()
    assert KEY2 not in guest.state.read_text()
    # The same pairs again: nothing touched.
    p, calls = guest('borrow 10.0.0.3 7400 %s\nlend 10.0.0.2 %s\n'
                     % (KEY2, KEY1))
    assert (p.returncode, calls) == (0, []), p.stderr


def test_gone_and_rekeyed_pairs(guest):
    guest('lend 10.0.0.2 %s\nlend 10.0.0.4 %s\n' % (KEY1, KEY1))
    p, calls = guest('lend 10.0.0.2 %s\n' % KEY2)
    assert p.returncode == 0, p.stderr
    assert sorted(calls[:2]) == ['borrower del 10.0.0.2',
                                 'borrower del 10.0.0.4']
    assert calls[2:] == ['borrower add 10.0.0.2 ' + KEY2]
    p, calls = guest('')
    assert calls == ['borrower del 10.0.0.2', 'role off']
    assert guest.sysfs.joinpath('role').read_text() == 'off\n'


def test_a_bad_line_changes_nothing(guest):
    for text in ('lend 10.0.0.2 short\n', 'lend 10.0.0.2 %s extra\n' % KEY1,
                 'borrow 10.0.0.3 99999 %s\n' % KEY1,
                 'borrow 10.0.0.3 port %s\n' % KEY1,
                 'lend 10.0.0.2;reboot %s\n' % KEY1,
                 'lend 10.0.0.2 %s\n' % ('k' * 65),
                 'lend 10.0.0.2 %s\n' % ('k$(id)' * 3),
                 'unlend 10.0.0.2 %s\n' % KEY1,
                 'link zz:zz:zz:zz:zz:zz\n',
                 'lend fe80::1 %s\n' % KEY1,
                 'lend 10.0.0.2 %s\n' % KEY1 * 300):
        p, calls = guest('lend 10.0.0.9 %s\n' % KEY1 + text)
        assert p.returncode == 1, (text, p.stdout)
        assert p.stderr.startswith('puma-pairs: '), p.stderr
        assert calls == [], (text, calls)
        assert not guest.state.exists() or \
            guest.state.read_text() == '', text


def test_a_failed_add_is_tried_again(guest):
    p, calls = guest('borrow 10.0.0.3 7400 %s\n' % KEY1, FAIL_ADD='1')
    assert p.returncode != 0
    p, calls = guest('borrow 10.0.0.3 7400 %s\n' % KEY1)
    assert p.returncode == 0, p.stderr
    assert calls == ['peer del 10.0.0.3:7400',
                     'peer add 10.0.0.3:7400 ' + KEY1]


def test_no_module(guest, tmp_path):
    p, _calls = guest('', PUMA_SYSFS=str(tmp_path / 'none'))
    assert p.returncode == 3
    assert 'module is not loaded' in p.stderr
