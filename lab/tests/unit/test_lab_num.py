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


def test_a_claim_names_its_owner(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, 'RUN', str(tmp_path))
    monkeypatch.setattr(netns, 'names', lambda: [])
    n = lab_mod._claim_num()
    assert (tmp_path / str(n) / lab_mod.OWNER).read_text() == \
        '%d\n' % os.getpid()


def _no_processes(monkeypatch):
    real = os.listdir
    monkeypatch.setattr(lab_mod.os, 'listdir',
                        lambda p: [] if p == '/proc' else real(p))


def test_another_live_runs_labs_are_not_leftovers(tmp_path, monkeypatch):
    """The kmod and lab envs run at once: each sees only its own remains."""
    monkeypatch.setattr(paths, 'RUN', str(tmp_path))
    monkeypatch.setattr(netns, 'names',
                        lambda: ['puma-1', 'puma-1-a', 'puma-2', 'puma-3'])
    _no_processes(monkeypatch)
    # 1: another process that still runs; 2: a process that ended;
    # 3: this process; 4: no owner at all.
    for num, pid in ((1, os.getppid()), (2, 2 ** 22 + 1),
                     (3, os.getpid()), (4, None)):
        (tmp_path / str(num)).mkdir()
        if pid:
            (tmp_path / str(num) / lab_mod.OWNER).write_text('%d\n' % pid)
    assert lab_mod.others_labs() == {1}
    assert lab_mod.leftovers() == [
        'netns puma-2', 'netns puma-3',
        'files in %s: 2, 3, 4' % tmp_path]


def test_no_other_run_means_everything_is_a_leftover(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, 'RUN', str(tmp_path))
    monkeypatch.setattr(netns, 'names', lambda: ['puma-7-b'])
    _no_processes(monkeypatch)
    assert lab_mod.leftovers() == ['netns puma-7-b']


def test_a_process_in_another_runs_namespace_is_not_a_leftover(
        tmp_path, monkeypatch):
    monkeypatch.setattr(paths, 'RUN', str(tmp_path))
    monkeypatch.setattr(lab_mod, 'NETNS_DIR', str(tmp_path / 'netns'))
    monkeypatch.setattr(netns, 'names', lambda: ['puma-1-a'])
    (tmp_path / 'netns').mkdir()
    (tmp_path / 'netns' / 'puma-1-a').write_text('')
    ino = os.stat(tmp_path / 'netns' / 'puma-1-a').st_ino
    real_stat = os.stat

    def fake_stat(p, *a, **kw):
        if str(p) == '/proc/42/ns/net':
            return os.stat_result((0, ino) + (0,) * 8)
        if str(p) == '/proc/43/ns/net':
            return os.stat_result((0, ino + 1) + (0,) * 8)
        return real_stat(p, *a, **kw)
    monkeypatch.setattr(lab_mod.os, 'stat', fake_stat)
    nums, inodes = {1}, lab_mod._ns_inodes({1})
    cmd = [b'qemu-system-x86_64', b'-name', b'vm']
    assert lab_mod._belongs_to('42', cmd, nums, inodes)
    assert not lab_mod._belongs_to('43', cmd, nums, inodes)
    cmd = [b'qemu-system-x86_64', ('%s/1/vm/qmp.sock' % tmp_path).encode()]
    assert lab_mod._belongs_to('43', cmd, nums, inodes)
    assert not lab_mod._belongs_to('43', cmd, {11}, inodes)
