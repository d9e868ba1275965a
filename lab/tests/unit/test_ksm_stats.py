# SPDX-License-Identifier: Apache-2.0
"""lab/bench ksm's reading of KSM's counters, its caching half, figures."""

import pytest

from puma_lab import errors
from puma_lab import host_cache
from puma_lab import host_cache_workload
from puma_lab import ksm_stats

SAMPLE = ('pages_shared 120\npages_sharing 3400\npages_unshared 9\n'
          'full_scans 2\nksm_zero_pages 0\ngeneral_profit 13000000\n'
          'pages_to_scan 1000\nksmd_ticks 250\nclk_tck 100\n')


def test_parse_sample():
    s = ksm_stats.parse_sample(SAMPLE, 12.5)
    assert s['t'] == 12.5 and s['pages_sharing'] == 3400
    assert s['full_scans'] == 2 and s['ksmd_cpu_s'] == 2.5
    assert 'clk_tck' not in s and 'ksmd_ticks' not in s


def test_parse_sample_of_a_kernel_without_some_counters():
    s = ksm_stats.parse_sample('pages_sharing 5\nksmd_ticks 10\n'
                               'clk_tck 100\n', 0)
    assert s == {'t': 0, 'pages_sharing': 5, 'ksmd_cpu_s': 0.1}


def _samples(sharing, scans, cpu):
    return [{'t': 10.0 * i, 'pages_sharing': p, 'full_scans': s,
             'ksmd_cpu_s': c, 'pages_shared': p // 10}
            for i, (p, s, c) in enumerate(zip(sharing, scans, cpu))]


def test_settled_needs_two_scans_and_no_growth():
    flat_early = _samples([0, 900, 1000, 1000, 1000], [0, 0, 1, 1, 1],
                          [0, 1, 2, 3, 4])
    assert not ksm_stats.settled(flat_early)          # one scan only
    done = _samples([0, 900, 1000, 1000, 1000, 1005], [0, 1, 2, 3, 3, 4],
                    [0, 1, 2, 3, 4, 5])
    assert ksm_stats.settled(done)
    growing = _samples([0, 500, 700, 900, 1000], [0, 1, 2, 3, 4],
                       [0, 1, 2, 3, 4])
    assert not ksm_stats.settled(growing)


def test_summary():
    s = ksm_stats.summary(_samples([0, 500, 950, 1000], [0, 1, 2, 3],
                                   [1.0, 2.0, 3.0, 5.0]))
    assert s['pages_sharing'] == 1000 and s['t90_s'] == 20.0
    assert s['ksmd_cpu_s'] == 4.0 and s['cpu_ms_per_page'] == 4.0
    assert s['full_scans'] == 3 and s['duration_s'] == 30.0
    assert s['sharing_at_cpu'] == [(0.0, 0), (1.0, 500), (2.0, 950),
                                   (4.0, 1000)]
    assert ksm_stats.sharing_at(s['sharing_at_cpu'], 1.5) == 500
    assert ksm_stats.sharing_at(s['sharing_at_cpu'], 9) == 1000


def test_summary_of_nothing_merged():
    s = ksm_stats.summary(_samples([0, 0], [0, 1], [0, 1]))
    assert s['pages_sharing'] == 0 and s['t90_s'] is None
    assert s['cpu_ms_per_page'] is None


def test_summary_counts_the_lookahead_over_the_run_only():
    samples = _samples([0, 500, 1000], [0, 1, 2], [0, 1, 2])
    for s, hits in zip(samples, (40, 90, 140)):
        s['lookahead_hits'], s['lookahead_misses'] = hits, 7
    s = ksm_stats.summary(samples)
    assert s['lookahead_hits'] == 100 and s['lookahead_misses'] == 0
    # A kernel without the series reads as no look-ahead at all.
    s = ksm_stats.summary(_samples([0, 5], [0, 1], [0, 1]))
    assert s['lookahead_hits'] == 0 and s['lookahead_misses'] == 0


def test_at_equal_cpu_compares_where_every_curve_was_measured():
    look = [(0.0, 0), (1.0, 800), (2.0, 1000), (6.0, 1200)]
    fast = [(0.0, 0), (1.0, 300), (3.0, 900)]
    slow = [(0.0, 0), (2.5, 600), (8.0, 1100)]
    # fast ends at 3.0 CPU s: the fewest; there look has 1000, the best
    # other (fast) 900.
    assert ksm_stats.at_equal_cpu(look, [fast, slow]) == (3.0, 1000, 900)
    assert ksm_stats.at_equal_cpu(look, []) is None
    assert ksm_stats.at_equal_cpu([], [fast]) is None


def test_cache_modes_give_qemu_the_file_driver_options():
    args = host_cache.blockdev_args('/run/puma-data/c0.img', 'exclusive')
    assert 'driver=file,node-name=datafile,filename=/run/puma-data/c0.img,' \
        'cache.direct=off,exclusive-cache=on' in args
    assert any('serial=%s' % host_cache.GUEST_SERIAL in a for a in args)
    assert 'cache.direct=on' in host_cache.blockdev_args('x', 'none')[1]
    with pytest.raises(errors.LabError):
        host_cache.blockdev_args('x', 'fast')


def test_a_second_data_disk_has_its_own_nodes_and_serial():
    first = host_cache.blockdev_args('a.img', 'writeback')
    second = host_cache.blockdev_args('b.img', 'exclusive', 1)
    assert 'virtio-blk-pci,drive=data1,serial=%s-1' \
        % host_cache.GUEST_SERIAL in second
    assert not set(first[1::2]) & set(second[1::2])
    assert "serial 2>/dev/null)\" = %s-1 ]" % host_cache.GUEST_SERIAL \
        in host_cache.find_device(1)
    assert host_cache.find_device() == host_cache.FIND_DEVICE


def test_caching_figures_compare_exclusive_with_the_others():
    def r(cache, read, reread):
        return {'host_cache_mb': cache, 'read_mb_s': read,
                'reread_mb_s': reread, 'read_s': 1, 'reread_s': 1,
                'data_mb': 192}
    fig = host_cache_workload.figures({
        'writeback': r(200.0, 50.0, 40.0), 'none': r(0.0, 45.0, 10.0),
        'exclusive': r(10.0, 49.0, 10.0)})
    assert fig['host_cache_x_writeback'] == 0.05
    assert fig['throughput_x_writeback'] == 0.98
    assert fig['throughput_x_none'] == 1.09
    assert fig['reread_x_writeback'] == 0.25
    assert fig['cache_none_host_cache_mb'] == 0.0
    # Without exclusive there is nothing to compare.
    assert 'host_cache_x_writeback' not in host_cache_workload.figures(
        {'writeback': r(200.0, 50.0, 40.0)})


def test_elapsed_times_come_from_the_guests_lines():
    out = 'x\nread 100.5 112.75\nreread 120.0 121.5\n'
    assert host_cache_workload._elapsed(out, 'read') == 12.25
    assert host_cache_workload._elapsed(out, 'reread') == 1.5
    with pytest.raises(AssertionError):
        host_cache_workload._elapsed('nothing', 'read')
