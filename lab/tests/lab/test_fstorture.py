# SPDX-License-Identifier: Apache-2.0
"""fstorture in real guests: ext4 and xfs data disks, both kernels.

Without Puma these runs show the tool finds nothing wrong with a sound
page cache and filesystem (under page-cache drops), and still reports a
stale block when one is planted; the Puma tests run the same tool with a
lender behind the page cache.  The tool is built on the host as a static
binary and handed over the 9p share, so a change to it needs no image
rebuild.
"""

import os
import re
import shutil
import subprocess

import pytest

from puma_lab import kmod
from puma_lab import paths
from puma_lab import vm

SRC = os.path.join(paths.TOP, 'lab', 'guest', 'fstorture.c')
BAD_DMESG = ('BUG:', 'Oops', 'WARNING:', 'Call Trace', 'I/O error',
             'EXT4-fs error', 'Corruption', 'metadata I/O error')
OPS = ('overwrite', 'append', 'truncate_down', 'truncate_up', 'punch',
       'direct', 'recreate', 'replace', 'fsync')
# Small files and directories live in their inode; a write to inline data
# goes through ext4_write_inline_data_end(), which no dirty hook sees.
EXT4_FEATURES = 'inline_data'
# 16 files of up to 2 MiB, page cache dropped every 4 s, a hook every 5 s.
TORTURE = ('/mnt/host/fstorture -d %s -t %d -f 16 -b 512 -r 2 -w 2 -D 4 '
           '-X 5 -x sync -s %d')


def build_tool(share):
    os.makedirs(share, exist_ok=True)
    subprocess.run(['gcc', '-O2', '-Wall', '-Werror', '-static', '-pthread',
                    '-o', os.path.join(share, 'fstorture'), SRC], check=True)


def blank_disk(path, size_mb, serial):
    with open(path, 'wb') as f:
        f.truncate(size_mb * 1024 * 1024)
    return vm.Disk(path, serial=serial)


def boot(lab, kernel):
    """A guest with an ext4 disk on /mnt/ext4 and an xfs one on /mnt/xfs."""
    share = lab.path('share')
    build_tool(share)
    ext4 = vm.make_data_disk(lab.path('ext4.img'), 192,
                             features=EXT4_FEATURES)
    ext4.serial = 'ext4'
    xfs = blank_disk(lab.path('xfs.img'), 320, 'xfs')
    g = vm.Guest(lab, 'fst' + kernel.replace('.', ''), kernel=kernel,
                 mem_mb=384, vcpus=2, disks=[ext4, xfs],
                 share=share).start().wait_booted()
    devs = {}
    for line in g.run('grep . /sys/block/vd*/serial').out.splitlines():
        path, serial = line.split(':', 1)
        devs[serial.strip()] = '/dev/' + path.split('/')[3]
    g.run('mkfs.xfs -q -f %s' % devs['xfs'], timeout=120)
    for fs in ('ext4', 'xfs'):
        g.run('mkdir -p /mnt/{0} && mount -t {0} {1} /mnt/{0}'
              .format(fs, devs[fs]))
    assert g.run('findmnt -n -o FSTYPE /mnt/xfs').out.strip() == 'xfs'
    return g


def torture(lab, g, fs, seconds, seed, extra=''):
    """Run fstorture on /mnt/FS; its output is kept with the lab's logs."""
    res = g.run(TORTURE % ('/mnt/' + fs, seconds, seed) + extra,
                timeout=600, check=False)
    name = 'fstorture-%s-%s%s.log' % (g.name, fs, extra.replace(' ', ''))
    with open(lab.path(name), 'w') as f:
        f.write(res.out + res.err)
    return res


def figures(out):
    last = [ln for ln in out.splitlines()
            if re.match(r'fstorture: (OK|FAILED) ', ln)][-1]
    return {k: float(v) for k, v in re.findall(r'(\w+)=([0-9.]+)', last)}


def check_dmesg(g):
    dmesg = g.run('dmesg').out
    for bad in BAD_DMESG:
        assert bad not in dmesg, dmesg


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_clean_runs_pass_on_ext4_and_xfs(lab, kernel):
    g = boot(lab, kernel)
    for seed, fs in enumerate(('ext4', 'xfs'), 1):
        res = torture(lab, g, fs, 20, seed)
        assert res.rc == 0, res
        fig = figures(res.out)
        assert fig['mismatches'] == 0 and fig['errors'] == 0, res.out
        # Every kind of change happened, with drops and hooks in between.
        for op in OPS:
            assert fig[op] > 0, (fs, op, res.out)
        assert fig['blocks_read'] > 0
        assert fig['drops'] >= 2 and fig['hooks'] >= 1, res.out
        # A passing run cleans up after itself.
        assert g.run('ls -A /mnt/' + fs).out.split() in ([], ['lost+found'])
    check_dmesg(g)


def test_injected_stale_block_fails(lab):
    g = boot(lab, '6.12')
    for fs in ('ext4', 'xfs'):
        res = torture(lab, g, fs, 15, 7, ' --inject-stale')
        assert res.rc == 2, res
        inj = re.search(r'injected stale block (\S+) block=(\d+) gen=(\d+) ',
                        res.out)
        assert inj, res.out
        path, block, gen = inj.groups()
        # Reported with the very block and version, also after the final
        # page-cache drop: the stale block is on disk.
        assert re.search(r'MISMATCH stale %s block=%s .* found file=0 '
                         r'inc=\d+ block=%s gen=%s ' % (path, block, block,
                                                        gen), res.out), \
            res.out
        assert figures(res.out)['mismatches'] >= 1
        assert 'fstorture: files kept in /mnt/%s/fstorture.' % fs in res.out
    check_dmesg(g)


PUMA_PORT = 7400
PUMACTL = 'sh /mnt/host/pumactl'


def puma_share(lab, kernel, require):
    """The share with fstorture, puma.ko and pumactl."""
    share = lab.path('share')
    build_tool(share)
    built = kmod.build(paths.kernel(kernel), lab.path('build'))
    pumactl = os.path.join(kmod.KMOD_SRC, 'tools', 'pumactl')
    require('cache lending\'s control tool',
            None if os.path.exists(pumactl) else
            '%s does not exist' % pumactl)
    shutil.copy(os.path.join(built, 'puma.ko'), share)
    shutil.copy(pumactl, share)
    kmod.ship_crypto(paths.kernel(kernel), share)
    return share


def puma_stats(g):
    out = g.run(PUMACTL + ' stats').out
    return {k: int(v) for k, v in (ln.split() for ln in out.splitlines())
            if v.isdigit()}


def puma_fs_stats(g, path):
    """Counters of the file system holding PATH alone (pumactl fsstats).

    Empty while none of its pages was put.
    """
    res = g.run('%s fsstats %s' % (PUMACTL, path), check=False)
    if res.rc and 'none of its pages put' in res.err:
        return {}
    assert res.rc == 0, res
    return {k: int(v) for k, v in (ln.split() for ln in res.out.splitlines())}


@pytest.mark.parametrize('kernel', paths.KERNELS)
def test_fstorture_under_puma(lab, kernel, require):
    """No wrong block with a lender behind the page cache, both modes.

    Page-cache drops push the borrower's pages to the lender, reads after
    them are served from it; the -x hook removes the peer and adds it
    again while files change.
    """
    share = puma_share(lab, kernel, require)
    lender = vm.Guest(lab, 'lend', kernel=kernel, mem_mb=512, nics=1,
                      share=share).start()
    disk = vm.make_data_disk(lab.path('ext4.img'), 192,
                             features=EXT4_FEATURES)
    g = vm.Guest(lab, 'borr', kernel=kernel, mem_mb=384, vcpus=2, nics=1,
                 disks=[disk], share=share).start()
    lender.wait_booted()
    g.wait_booted()
    peer = '%s:%d' % (lender.addrs[0].split('/')[0], PUMA_PORT)
    for guest in (lender, g):
        guest.run('insmod /mnt/host/puma.ko && %s key fstorture-key-0123'
                  % PUMACTL)
    lender.run('%s port %d && %s role lender' % (PUMACTL, PUMA_PORT,
                                                 PUMACTL))
    # TCG guests on a shared host: gets can be slow, keep them all.
    g.run(kmod.CRYPTO_LOAD)
    g.run('{0} set rtt_guard_us 0 && {0} role borrower && {0} peer add {1}'
          .format(PUMACTL, peer))
    g.run('for i in $(seq 120); do grep -q " ready" /sys/kernel/puma/peers'
          ' && exit 0; sleep 0.5; done; exit 1', timeout=120)
    g.run('mkdir -p /mnt/ext4 && mount /dev/vdb /mnt/ext4')
    readd = ('{0} peer del {1}; sleep 1; {0} peer add {1}'
             .format(PUMACTL, peer))
    for seed, mode in enumerate(('noninclusive', 'exclusive'), 1):
        g.run('%s set mode %s' % (PUMACTL, mode))
        before = puma_stats(g)
        fs_before = puma_fs_stats(g, '/mnt/ext4')
        res = g.run('/mnt/host/fstorture -d /mnt/ext4 -t 25 -f 16 -b 512 '
                    '-D 3 -X 10 -x "%s" -s %d' % (readd, seed),
                    timeout=900, check=False)
        after = puma_stats(g)
        fs_after = puma_fs_stats(g, '/mnt/ext4')
        with open(lab.path('fstorture-puma-%s.log' % mode), 'w') as f:
            f.write(res.out + res.err)
            f.write('borrower stats before: %s\nafter: %s\n'
                    % (before, after))
            f.write('data disk before: %s\nafter: %s\n'
                    % (fs_before, fs_after))
            f.write(g.run('%s fsstats' % PUMACTL).out)
        assert res.rc == 0, res
        assert figures(res.out)['mismatches'] == 0
        # The lender really served reads of the data disk during the run
        # (the global hits also count the root file system: the hook's
        # own binaries are put and hit after each page-cache drop).
        delta = {k: fs_after.get(k, 0) - fs_before.get(k, 0)
                 for k in ('gets', 'hits', 'misses', 'get_stale_dropped')}
        print('fstorture puma %s %s: data disk %s, all hits %d'
              % (kernel, mode, delta, after['hits'] - before['hits']))
        assert delta['hits'] > 0, (fs_before, fs_after)
        assert delta['gets'] == delta['hits'] + delta['misses'] + \
            delta['get_stale_dropped'], delta
    check_dmesg(g)
    check_dmesg(lender)
