# SPDX-License-Identifier: Apache-2.0
"""fstorture passes on a sound filesystem and catches wrong blocks.

Run on the host's filesystem (no guest): the checker itself is under test
here; lab/tests/lab/test_fstorture.py runs it in guests.
"""

import os
import re
import subprocess

import pytest

from puma_lab import paths

SRC = os.path.join(paths.TOP, 'lab', 'guest', 'fstorture.c')


@pytest.fixture(scope='module')
def exe(tmp_path_factory):
    out = str(tmp_path_factory.mktemp('bin') / 'fstorture')
    subprocess.run(['gcc', '-O2', '-Wall', '-Wextra', '-Werror', '-pthread',
                    '-o', out, SRC], check=True)
    return out


def run(exe, *args):
    return subprocess.run([exe] + list(args), capture_output=True, text=True,
                          timeout=120)


def figures(out):
    last = [ln for ln in out.splitlines()
            if re.match(r'fstorture: (OK|FAILED) ', ln)][-1]
    return {k: float(v) for k, v in re.findall(r'(\w+)=([0-9.]+)', last)}


def test_clean_run_passes(exe, tmp_path):
    p = run(exe, '-d', str(tmp_path), '-t', '2', '-s', '1')
    assert p.returncode == 0, p.stdout + p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith('fstorture: OK ')
    fig = figures(p.stdout)
    assert fig['mismatches'] == 0 and fig['errors'] == 0
    # Every kind of change really happened, and reads checked blocks.
    for op in ('overwrite', 'append', 'truncate_down', 'truncate_up',
               'punch', 'direct', 'recreate', 'replace', 'fsync'):
        assert fig[op] > 0, (op, last)
    assert fig['blocks_read'] > 0
    # A passing run leaves nothing behind.
    assert os.listdir(tmp_path) == []


# Two writers, or none: then (as when a loaded host starves the writers,
# CI of 2026-12-08) no writer reaches file 0 after a third of the run and
# the block is injected before the final pass.
@pytest.mark.parametrize('writers', ['2', '0'])
def test_injected_stale_block_is_reported(exe, tmp_path, writers):
    p = run(exe, '-d', str(tmp_path), '-t', '2', '-s', '2', '-w', writers,
            '--inject-stale')
    assert p.returncode == 2, p.stdout + p.stderr
    inj = re.search(r'injected stale block (\S+) block=(\d+) gen=(\d+) '
                    r'\(expected gen=(\d+)\)', p.stdout)
    assert inj, p.stdout
    path, block, old, new = inj.groups()
    # The report names the very block, the expected and the found version.
    assert re.search(r'MISMATCH stale %s block=%s expected inc=\d+ gen=%s '
                     r'found file=0 inc=\d+ block=%s gen=%s '
                     % (path, block, new, block, old), p.stdout), p.stdout
    assert p.stdout.strip().splitlines()[-1] == \
        'fstorture: files kept in %s' % os.path.join(
            str(tmp_path), os.listdir(tmp_path)[0])
    assert 'fstorture: FAILED ' in p.stdout


def test_outside_changes_are_classified(exe, tmp_path):
    """Blocks changed behind the tool's back, by the -x hook."""
    hook = ('dd if=f00001 of=f00000 bs=4096 count=1 conv=notrunc status=none'
            ' && dd if=/dev/zero of=f00002 bs=4096 seek=1 count=1 '
            'conv=notrunc status=none && truncate -s +4096 f00003')
    # No writers: what the hook did stays until the final pass.
    p = run(exe, '-d', str(tmp_path), '-t', '1.5', '-w', '0', '-b', '8',
            '-s', '3', '-X', '0.3', '-x', hook)
    assert p.returncode == 2, p.stdout + p.stderr
    assert re.search(r'MISMATCH misplaced f00000 block=0 expected inc=0 '
                     r'gen=1 found file=1 inc=0 block=0 gen=1', p.stdout)
    assert re.search(r'MISMATCH zeros f00002 block=1 ', p.stdout)
    assert re.search(r'MISMATCH size f00003 ', p.stdout)
    assert figures(p.stdout)['hooks'] >= 1


def test_failing_hook_fails_the_run(exe, tmp_path):
    p = run(exe, '-d', str(tmp_path), '-t', '1', '-X', '0.2', '-x', 'exit 7')
    assert p.returncode == 1, p.stdout + p.stderr
    assert "ERROR hook 'exit 7' exited 7" in p.stdout
    assert figures(p.stdout)['mismatches'] == 0


@pytest.mark.parametrize('args,msg', [
    (['-f', '0'], "-f: bad value '0'"),
    (['-t', 'soon'], "-t: bad value 'soon'"),
    (['-t', '0'], '-t 0 needs -n OPS'),
    (['-D', '0'], "-D: bad value '0'"),
    (['extra'], "unexpected argument 'extra'"),
])
def test_bad_options_are_refused(exe, tmp_path, args, msg):
    p = run(exe, '-d', str(tmp_path), *args)
    assert p.returncode == 1
    assert msg in p.stderr
    assert os.listdir(tmp_path) == []


def test_only_its_own_directory_is_touched(exe, tmp_path):
    mine = tmp_path / 'f00000'
    mine.write_text('not yours')
    p = run(exe, '-d', str(tmp_path), '-t', '0', '-n', '500', '-s', '4')
    assert p.returncode == 0, p.stdout + p.stderr
    assert mine.read_text() == 'not yours'
    assert os.listdir(tmp_path) == ['f00000']
    not_dir = run(exe, '-d', str(mine))
    assert not_dir.returncode == 1
    assert 'is not a directory' in not_dir.stderr
    assert mine.read_text() == 'not yours'
