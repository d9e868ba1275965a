# SPDX-License-Identifier: Apache-2.0
"""KSM's counters on a kernel host, and what ``lab/bench ksm`` makes of them.

A sample is one read of ``/sys/kernel/mm/ksm`` and of ksmd's CPU time on
the kernel host (``SAMPLE_SCRIPT``, whose output ``parse_sample`` reads);
``summary`` turns one setting's samples into its figures.
"""

# Counters read at each sample; those a kernel lacks read as absent.
COUNTERS = ('pages_shared', 'pages_sharing', 'pages_unshared',
            'full_scans', 'ksm_zero_pages', 'general_profit',
            'pages_to_scan', 'pages_skipped', 'lookahead_hits',
            'lookahead_misses')

# Prints "name value" lines: the counters, then ksmd's CPU time in clock
# ticks (utime + stime, fields 14 and 15 of its stat) and the tick rate.
SAMPLE_SCRIPT = (
    'cd /sys/kernel/mm/ksm && for f in %s; do '
    '[ -r $f ] && echo "$f $(cat $f)"; done; '
    'pid=$(pgrep -x ksmd); '
    'echo "ksmd_ticks $(awk \'{print $14 + $15}\' /proc/$pid/stat)"; '
    'echo "clk_tck $(getconf CLK_TCK)"' % ' '.join(COUNTERS))


def parse_sample(text, t):
    """{'t': T, counter: int, ..., 'ksmd_cpu_s': float} from SAMPLE_SCRIPT."""
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(' ')
        if value.strip().lstrip('-').isdigit():
            values[name] = int(value)
    tck = values.pop('clk_tck', 100) or 100
    sample = {'t': t}
    sample.update((k, v) for k, v in values.items() if k in COUNTERS)
    sample['ksmd_cpu_s'] = values.get('ksmd_ticks', 0) / tck
    return sample


def settled(samples, window=3, growth=0.01, scans=2):
    """Whether merging has settled.

    It has after SCANS full scans since the start, once pages_sharing grew
    by less than GROWTH over the last WINDOW samples.
    """
    if len(samples) <= window:
        return False
    first = samples[0]
    last = samples[-1]
    if last.get('full_scans', 0) - first.get('full_scans', 0) < scans:
        return False
    before = samples[-1 - window]['pages_sharing']
    return last['pages_sharing'] - before <= growth * max(before, 1)


def summary(samples):
    """One setting's figures from its samples (the first is its start).

    ``pages_sharing``: at the end; ``t90_s``: seconds until 90 % of it;
    ``ksmd_cpu_s``: ksmd's CPU time over the samples;
    ``cpu_ms_per_page``: that per page sharing at the end;
    ``sharing_at_cpu``: [(ksmd CPU seconds, pages_sharing)] over time,
    the curve that compares settings at equal CPU.
    """
    first, last = samples[0], samples[-1]
    final = last['pages_sharing']
    t90 = next((s['t'] - first['t'] for s in samples
                if s['pages_sharing'] >= 0.9 * final), None) \
        if final else None
    cpu = last['ksmd_cpu_s'] - first['ksmd_cpu_s']
    return {
        'pages_sharing': final,
        'pages_shared': last.get('pages_shared', 0),
        'zero_pages': last.get('ksm_zero_pages', 0),
        'full_scans': last.get('full_scans', 0) - first.get('full_scans', 0),
        'duration_s': round(last['t'] - first['t'], 1),
        't90_s': None if t90 is None else round(t90, 1),
        'ksmd_cpu_s': round(cpu, 2),
        'cpu_ms_per_page': round(1000 * cpu / final, 3) if final else None,
        'pages_to_scan_end': last.get('pages_to_scan'),
        # The look-ahead's own counters (the khost kernel's KSM series).
        'lookahead_hits': (last.get('lookahead_hits', 0) -
                           first.get('lookahead_hits', 0)),
        'lookahead_misses': (last.get('lookahead_misses', 0) -
                             first.get('lookahead_misses', 0)),
        'sharing_at_cpu': [(round(s['ksmd_cpu_s'] - first['ksmd_cpu_s'], 2),
                            s['pages_sharing']) for s in samples],
    }


def sharing_at(curve, cpu_s):
    """pages_sharing once ksmd had used CPU_S seconds (last point before)."""
    best = 0
    for cpu, sharing in curve:
        if cpu <= cpu_s:
            best = sharing
    return best


def at_equal_cpu(curve, others):
    """CURVE's pages_sharing against the best of OTHERS at equal CPU.

    The CPU seconds compared are the fewest any of the curves reached, so
    every curve has been measured there.  Returns (cpu_s, sharing of CURVE,
    best sharing of OTHERS); None when a curve is empty.
    """
    curves = [curve] + list(others)
    if not others or not all(curves):
        return None
    cpu_s = min(c[-1][0] for c in curves)
    return (cpu_s, sharing_at(curve, cpu_s),
            max(sharing_at(c, cpu_s) for c in others))
