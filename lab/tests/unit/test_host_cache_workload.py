# SPDX-License-Identifier: Apache-2.0
"""The caching half's guest scripts, as the guests' shell gets them."""

from puma_lab import host_cache_workload as w


def test_every_script_times_with_dates_the_shell_understands():
    # lab/bench ksm of 2026-12-07 lost its caching half to a script that
    # asked date for "%%s.%%N" and printed "reread %s.%N %s.%N".
    scripts = [w.MEASURE % {'rounds': 2}, w.REREAD]
    for script in scripts:
        assert script.count('date +%s.%N') == 2, script
        assert '%%' not in script, script
    assert '%%' not in w.PREPARE % {'files': 2, 'mb': 8}


def test_elapsed_reads_the_times_a_script_prints():
    out = 'read 10.25 12.75\nreread 20.0 21.5\n'
    assert w._elapsed(out, 'read') == 2.5
    assert w._elapsed(out, 'reread') == 1.5
