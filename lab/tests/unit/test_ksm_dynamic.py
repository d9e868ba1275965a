# SPDX-License-Identifier: Apache-2.0
"""lab/bench ksm's dynamic phase: phase ends, its grid, its figures."""

import threading
import time

from puma_lab import agent
from puma_lab.benches import ksm
from puma_lab.benches import ksm_dynamic


def _samples(points):
    return [{'t': t, 'pages_sharing': p, 'ksmd_cpu_s': c}
            for t, p, c in points]


SAMPLES = _samples([(0.2, 0, 1.0), (5.1, 10, 1.5), (10.3, 40, 2.0),
                    (15.0, 90, 3.0), (20.2, 100, 3.5), (24.0, 120, 4.0)])
MARKS = [(0.0, 'boot'), (11.0, 'idle'), (16.0, 'work'), (21.0, 'after')]


def test_a_phase_ends_with_the_last_sample_before_the_next_one():
    ends = ksm_dynamic.phase_ends(SAMPLES, MARKS)
    assert ends == {'boot': (40, 1.0), 'idle': (90, 2.0),
                    'work': (100, 2.5), 'after': (120, 3.0)}


def test_the_grid_holds_the_last_sample_at_each_step():
    assert ksm_dynamic.on_grid(SAMPLES, 5) == [0, 0, 10, 90, 90]
    assert ksm_dynamic.on_grid(SAMPLES[:1], 5) == [0]


def test_plot_marks_name_each_setting_s_phases():
    results = {'plain': {'grid': [0, 1], 'marks': MARKS},
               'stock': {'grid': [0, 2], 'marks': MARKS[:2]}}
    series, marks = ksm_dynamic.plot_series(results)
    assert series == {'plain': [0, 1], 'stock': [0, 2]}
    assert marks == [(11.0, 'p idle'), (16.0, 'p work'), (21.0, 'p after'),
                     (11.0, 's idle')]


def test_the_dynamic_look_ahead_figures_are_the_static_ones_prefixed():
    def r(curve, per_page):
        return {'sharing_at_cpu': curve, 'cpu_ms_per_page': per_page,
                'lookahead_hits': 5, 'lookahead_misses': 1}
    results = {'stock': r([(0.0, 0), (2.0, 500), (4.0, 800)], 0.5),
               'plain': r([(0.0, 0), (3.0, 400)], 0.8),
               'lookahead': r([(0.0, 0), (1.0, 600), (5.0, 900)], 0.4)}
    static, dynamic = {}, {}
    ksm.lookahead_figures(static, results)
    ksm.lookahead_figures(dynamic, results, prefix='dyn_')
    assert dynamic == {'dyn_' + k: v for k, v in static.items()}
    # At 3.0 CPU s (plain's end): look-ahead 600, the best stock 500.
    assert dynamic['dyn_lookahead_sharing_x'] == 1.2
    assert dynamic['dyn_lookahead_cpu_per_page_x'] == 0.8


def test_a_serialized_transport_sends_one_request_at_a_time():
    inside, most = [0], [0]

    def transport(cmd, timeout):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.01)
        inside[0] -= 1
        return {'return': cmd}

    t = agent.SerializedTransport(transport)
    threads = [threading.Thread(target=t, args=({'n': i}, 1))
               for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert most[0] == 1


def test_the_workload_s_status_file_gives_its_rc_and_guest_time():
    assert ksm_dynamic._work_rc('0 100.25 163.75\n') == (0, 63.5)
    assert ksm_dynamic._work_rc('') is None
    assert ksm_dynamic._work_rc('0 100.25') is None
