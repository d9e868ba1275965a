# SPDX-License-Identifier: Apache-2.0
"""A kernel host's KSM: its knobs set, its counters sampled, unmerged.

What both phases of ``lab/bench ksm`` (benches/ksm.py, the static one,
and benches/ksm_dynamic.py) do to ``/sys/kernel/mm/ksm`` of a kernel host;
ksm_stats.py reads the samples.
"""

import time

from puma_lab import errors
from puma_lab import ksm_stats


def set_knobs(kh, settings):
    """Write SETTINGS to the kernel host's KSM.

    A knob the kernel lacks is skipped when it is asked to be off (0 or
    none: what that kernel does anyway) and an error otherwise.
    """
    script = ['cd /sys/kernel/mm/ksm']
    for name, value in settings.items():
        off = str(value) in ('0', 'none')
        script.append('if [ -w %s ]; then echo %s > %s; %s fi'
                      % (name, value, name,
                         '' if off else
                         'else echo "KSM has no knob %s" >&2; exit 1;'
                         % name))
    kh.sh('; '.join(script))


def sample(kh, t0):
    """One sample of KSM's counters and ksmd's CPU, at T0-relative time."""
    out = kh.sh(ksm_stats.SAMPLE_SCRIPT).out
    return ksm_stats.parse_sample(out, time.monotonic() - t0)


def unmerge(kh, timeout=600):
    """run=2: KSM gives every merged page back; wait until it did."""
    kh.sh('echo 2 > /sys/kernel/mm/ksm/run', timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = sample(kh, 0)
        if not s.get('pages_shared') and not s.get('pages_sharing'):
            return
        time.sleep(2)
    raise errors.LabError('KSM did not unmerge within %ds' % timeout)


def setting_knobs(settings, pages_to_scan):
    """A setting's knobs: pages_to_scan too, unless the advisor sets it."""
    knobs = dict(settings)
    if settings.get('advisor_mode') != 'scan-time':
        knobs['pages_to_scan'] = pages_to_scan
    return knobs
