# SPDX-License-Identifier: Apache-2.0
"""The small-destination scenario's throughput timeline and its keys."""

from puma_lab import small_dest


def timeline(points):
    tl = small_dest.Timeline(0, 96)     # a 96 MiB hot set
    tl.samples = list(points)
    return tl


def test_rate_between_samples():
    # One round (96 MiB) every 3 s: 32 MiB/s.
    tl = timeline([(t, t // 3) for t in range(0, 61, 3)])
    assert tl.rate(0, 60) == 32.0
    assert tl.rate(10, 40) == 32.0
    # Fewer than two samples inside: no figure, not zero.
    assert tl.rate(61, 90) is None


def test_bins_show_a_stall():
    # 32 MiB/s, then nothing for 30 s (the guest waits), then 32 again.
    pts = [(t, t // 3) for t in range(0, 30, 3)]
    pts += [(t, 9) for t in range(30, 60, 3)]
    pts += [(t, 9 + (t - 60) // 3) for t in range(60, 91, 3)]
    bins = timeline(pts).bins()
    assert len(bins) == 9
    assert bins[0] == 32.0
    assert bins[4] == 0.0
    assert bins[-1] > 0


def test_keys_when_split_fails_and_precopy_works():
    res = {
        'room': {'ok': True, 'after_mibs': 32.0},
        'precopy': {'ok': True, 'peak_x_limit': 1.0, 'after_mibs': 8.0},
        'postcopy': {'ok': False, 'status': 'failed',
                     'error': 'destination QEMU OOM-killed',
                     'source_running': False},
        'split': {'ok': False, 'status': 'failed', 'error': 'x'},
    }
    out = small_dest.figures(res)
    assert out['precopy_ok_small_dest'] is True
    assert out['postcopy_ok_small_dest'] is False
    assert out['split_ok_small_dest'] is False
    assert out['small_postcopy_source_running'] is False
    # No throughput figure for a mode that did not move the guest.
    assert out['throughput_after_x_full'] is None
    assert out['peak_dest_x_limit'] is None


def test_throughput_ratio_against_the_roomy_destination():
    res = {'room': {'ok': True, 'after_mibs': 32.0, 'wire_bytes': 100,
                    'used_bytes': 100},
           'split': {'ok': True, 'after_mibs': 28.8, 'peak_x_limit': 1.02,
                     'wire_bytes': 90, 'used_bytes': 100, 'pageins': 7,
                     'pageouts': 9}}
    out = small_dest.figures(res)
    assert (out['small_split_pageins'], out['small_split_pageouts']) == (7, 9)
    assert out['throughput_after_x_full'] == 0.9
    assert out['peak_dest_x_limit'] == 1.02
    assert out['small_split_bytes_x_used'] == 0.9
    assert out['precopy_ok_small_dest'] is None


def test_plot_draws_every_mode(tmp_path):
    res = {'room': {'timeline_mibs': [30.0, 32.0, 32.0]},
           'precopy': {'timeline_mibs': [31.0]},
           'split': {'timeline_mibs': [29.0, None, 32.0, 32.0],
                     'moved_s': 6.0}}
    path = tmp_path / 'tl.svg'
    small_dest.plot(res, str(path))
    svg = path.read_text()
    assert svg.startswith('<svg') and svg.rstrip().endswith('</svg>')
    # room and split's second run are lines, precopy's one point a dot.
    assert svg.count('<polyline') == 2
    assert svg.count('<circle') == 2
    for label in ('room', 'precopy', 'split', 'split moved'):
        assert '>%s</text>' % label in svg
