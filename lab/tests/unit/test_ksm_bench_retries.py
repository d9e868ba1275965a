# SPDX-License-Identifier: Apache-2.0
"""lab/bench ksm: a machine fault measures again only what was left."""

from puma_lab.benches import ksm
from puma_lab import kernel_host


def test_a_fault_in_the_caching_half_keeps_the_merging_figures(
        monkeypatch):
    runs = []

    def run_once(args, names, results, dynamic, caching):
        runs.append((dict(results), dict(caching)))
        if not results:
            results.update({n: {'run': len(runs)} for n in names})
        for m in args.modes:
            if m in caching:
                continue
            if len(runs) == 1 and m == 'none':
                raise kernel_host.MachineFault('guest c1 reset')
            caching[m] = {'run': len(runs)}

    figures = {}
    monkeypatch.setattr(ksm, '_run_once', run_once)
    monkeypatch.setattr(ksm, '_figures', lambda args, results, caching:
                        figures.update(results=results, caching=caching)
                        or {})
    fig = ksm.run(['--settings', 'plain,stock', '--host-kernel', '6.12',
                   '--cache-modes', 'writeback,none,exclusive'])
    assert len(runs) == 2
    # The second try had the merging and writeback figures of the first.
    assert runs[1] == ({'plain': {'run': 1}, 'stock': {'run': 1}},
                       {'writeback': {'run': 1}})
    assert figures['results'] == {'plain': {'run': 1}, 'stock': {'run': 1}}
    assert figures['caching'] == {'writeback': {'run': 1},
                                  'none': {'run': 2},
                                  'exclusive': {'run': 2}}
    assert fig['machine_faults'] == ['guest c1 reset']
