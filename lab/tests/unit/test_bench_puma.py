# SPDX-License-Identifier: Apache-2.0
"""The puma bench turns fio reports into figures, null where not run."""

from puma_lab.benches import puma


def fio_report(iops, kib_s, p50_ns, p99_ns):
    # The part of fio's --output-format=json report the bench reads.
    return {'jobs': [{'read': {
        'iops': iops, 'bw': kib_s,
        'clat_ns': {'percentile': {'50.000000': p50_ns,
                                   '99.000000': p99_ns}}}}]}


def test_fio_figures():
    fig = puma.fio_figures(fio_report(312.5, 1250, 16000, 5046272))
    assert fig == {'iops': 312.5, 'mib_s': 1.22, 'p50_ms': 0.016,
                   'p99_ms': 5.046}


def test_puma_not_run_gives_nulls_and_the_reason():
    meas = {'nopuma': {'random': {'iops': 300.0, 'p99_ms': 6.0,
                                  'p50_ms': 0.02, 'disk_reads': 9000},
                       'seq': {'mib_s': 24.0, 'p99_ms': 9.0}},
            'upper': {'random': {'iops': 6000.0, 'p99_ms': 0.5,
                                 'p50_ms': 0.01}}}
    why = {'puma': 'puma.ko has no control interface'}
    out = puma.summarize(meas, why)
    assert out['random_iops_nopuma'] == 300.0
    assert out['random_disk_reads_nopuma'] == 9000
    assert out['random_iops_upper'] == 6000.0
    assert out['seq_mib_s_nopuma'] == 24.0
    assert out['upper_x_nopuma'] == 20.0
    for key in ('random_x_nopuma', 'random_x_upper', 'seq_x_nopuma',
                'random_iops_puma', 'seq_mib_s_puma',
                'seq_nofilter_mib_s_puma', 'puma_stats',
                'lender_reclaim_x', 'lender_alloc_idle_s',
                'lender_hosted_before', 'random_gets_puma',
                'random_hits_puma', 'net_rtt_ms'):
        assert out[key] is None, key
    assert out['p99_ms'] == {'random_nopuma': 6.0, 'seq_nopuma': 9.0,
                             'random_upper': 0.5, 'random_puma': None,
                             'seq_puma': None, 'seq_nofilter_puma': None}
    assert out['skipped'] == why


def test_ratios_when_every_case_ran():
    meas = {'nopuma': {'random': {'iops': 300.0}, 'seq': {'mib_s': 24.0}},
            'upper': {'random': {'iops': 6000.0}},
            'puma': {'random': {'iops': 4500.0, 'gets': 900, 'hits': 890},
                     'seq': {'mib_s': 23.0},
                     'net_rtt_ms': {'min': 0.2, 'avg': 0.3, 'max': 0.9},
                     'seq_nofilter': {'mib_s': 40.0},
                     'stats': {'hits': 7},
                     'reclaim': {'alloc_idle_s': 2.0,
                                 'alloc_hosting_s': 2.5,
                                 'hosted_before': 60000,
                                 'hosted_after': 100, 'lend_shrunk': 59900,
                                 'lend_suspends': 1}}}
    out = puma.summarize(meas, {})
    assert out['lender_reclaim_x'] == 1.25
    assert out['lender_alloc_hosting_s'] == 2.5
    assert out['lender_hosted_before'] == 60000
    assert out['lender_hosted_after'] == 100
    assert out['lender_lend_shrunk'] == 59900
    assert out['random_x_nopuma'] == 15.0
    assert out['random_x_upper'] == 0.75
    assert out['seq_x_nopuma'] == 0.96
    assert out['seq_nofilter_mib_s_puma'] == 40.0
    assert out['puma_stats'] == {'hits': 7}
    assert out['random_gets_puma'] == 900
    assert out['random_hits_puma'] == 890
    assert out['net_rtt_ms'] == {'min': 0.2, 'avg': 0.3, 'max': 0.9}


def test_net_rtt_parses_ping_summary():
    class Guest(object):
        def run(self, cmd):
            assert cmd == 'ping -c 20 -i 0.2 -q 10.0.0.2'

            class Res(object):
                out = ('20 packets transmitted, 20 received, 0% packet '
                       'loss, time 3807ms\n'
                       'rtt min/avg/max/mdev = 1.005/1.753/7.319/1.401 ms\n')
            return Res()

    assert puma.net_rtt_ms(Guest(), '10.0.0.2') == {
        'min': 1.005, 'avg': 1.753, 'max': 7.319}
