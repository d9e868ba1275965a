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


MODEL = {'dilation': 38.0, 'delay_ms': {'netvol': 38.0, 'hdd': 304.0}}


def test_puma_not_run_gives_nulls_and_the_reason():
    meas = {'nopuma': {'random_netvol': [{'iops': 30.0, 'p99_ms': 60.0,
                                          'disk_reads': 900},
                                         {'iops': 34.0, 'p99_ms': 50.0,
                                          'disk_reads': 800},
                                         {'iops': 20.0, 'p99_ms': 70.0,
                                          'disk_reads': 1000}],
                       'app': [{'qps': 10.0}],
                       'seq': [{'mib_s': 24.0}]},
            'rtt_ms': {'p50': 1.9}}
    why = {'puma': 'puma.ko has no control interface',
           'shm': 'puma.ko has no control interface'}
    out = puma.summarize(meas, why, MODEL)
    assert out['model'] == MODEL
    assert out['random_netvol_iops_nopuma'] == {
        'median': 30.0, 'min': 20.0, 'max': 34.0, 'runs': [30.0, 34.0, 20.0]}
    assert out['random_netvol_disk_reads_nopuma']['median'] == 900
    assert out['app_qps_nopuma']['median'] == 10.0
    assert out['seq_mib_s_nopuma']['median'] == 24.0
    for key in ('random_x_nopuma_netvol', 'random_x_nopuma_hdd',
                'app_x_nopuma_netvol', 'seq_x_nopuma', 'get_p50_x_rtt',
                'shm_get_x_tcp', 'lender_slowdown',
                'crypto_cpu_us_per_get', 'random_netvol_iops_puma',
                'random_hdd_iops_nopuma', 'getlat_p50_ms_puma',
                'puma_stats', 'lender_alloc_idle_s', 'getlat_p50_ms_tcp',
                'getlat_p50_ms_shm'):
        assert out[key] is None, key
    assert out['skipped'] == why


def test_ratios_are_of_medians_when_every_case_ran():
    def runs(*iops):
        return [{'iops': i} for i in iops]
    meas = {'rtt_ms': {'min': 1.0, 'avg': 2.2, 'max': 9.0, 'p50': 2.0},
            'nopuma': {'random_netvol': runs(20.0, 30.0, 25.0),
                       'random_hdd': runs(3.0, 4.0, 5.0),
                       'app': [{'qps': 8.0}, {'qps': 10.0}, {'qps': 9.0}],
                       'seq': [{'mib_s': 24.0}]},
            'upper': {'random_netvol': runs(5000.0)},
            'puma': {'random_netvol': runs(250.0, 300.0, 200.0),
                     'random_hdd': runs(160.0, 150.0, 170.0),
                     'app': [{'qps': 40.0}, {'qps': 36.0}, {'qps': 50.0}],
                     'seq': [{'mib_s': 23.0}],
                     'getlat': [{'p50_ms': 2.5, 'p99_ms': 9.0,
                                 'gets': 900, 'hits': 890}],
                     'crypto': {'opens': 1000, 'open_ns': 25000000,
                                'seals': 10, 'seal_ns': 300000},
                     'stats': {'hits': 7},
                     'reclaim': {'alloc_idle_s': 2.0,
                                 'alloc_hosting_s': 2.5,
                                 'hosted_before': 60000,
                                 'hosted_after': 100, 'lend_shrunk': 59900,
                                 'lend_suspends': 1}},
            'shm': {'getlat_tcp': [{'p50_ms': 2.0, 'p99_ms': 5.0},
                                   {'p50_ms': 3.0, 'p99_ms': 6.0},
                                   {'p50_ms': 2.4, 'p99_ms': 9.0}],
                    'getlat_shm': [{'p50_ms': 1.2, 'p99_ms': 3.0},
                                   {'p50_ms': 0.9, 'p99_ms': 2.0},
                                   {'p50_ms': 1.0, 'p99_ms': 4.0}]}}
    out = puma.summarize(meas, {}, MODEL)
    assert out['random_x_nopuma_netvol'] == 10.0
    assert out['random_x_nopuma_hdd'] == 40.0
    assert out['random_x_upper_netvol'] == 0.05
    assert out['app_x_nopuma_netvol'] == 4.44
    assert out['seq_x_nopuma'] == 0.96
    assert out['get_p50_x_rtt'] == 1.25
    assert out['getlat_hits_puma']['median'] == 890
    assert out['crypto_cpu_us_per_get'] == 25.0
    assert out['crypto_cpu_us_per_put'] == 30.0
    assert out['lender_slowdown'] == 1.25
    assert out['lender_hosted_before'] == 60000
    assert out['lender_lend_shrunk'] == 59900
    # Medians 1.0 ms over shared memory, 2.4 ms over TCP; runs kept.
    assert out['shm_get_x_tcp'] == 0.42
    assert out['getlat_p50_ms_shm']['runs'] == [1.2, 0.9, 1.0]
    assert out['getlat_p50_ms_tcp']['median'] == 2.4
    assert out['puma_stats'] == {'hits': 7}
    assert out['net_rtt_ms']['p50'] == 2.0


def test_net_rtt_parses_each_reply():
    class Guest(object):
        name = 'b'

        def run(self, cmd):
            assert cmd == 'ping -c 3 -i 0.2 10.0.0.2'

            class Res(object):
                out = ('64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 '
                       'time=1.00 ms\n'
                       '64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 '
                       'time=7.31 ms\n'
                       '64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 '
                       'time=1.75 ms\n'
                       'rtt min/avg/max/mdev = 1.0/3.353/7.31/2.8 ms\n')
            return Res()

    assert puma.net_rtt_ms(Guest(), '10.0.0.2', count=3) == {
        'min': 1.0, 'avg': 3.353, 'max': 7.31, 'p50': 1.75}
