# SPDX-License-Identifier: Apache-2.0
"""Where the time of a live migration through OpenStack goes.

``./lab/bench cloud`` times ``openstack server migrate`` until Nova's
record says ``completed``.  The services' own logs (oslo.log lines, INFO,
timestamps to the millisecond, the lab's one clock) split that time at
the points every such migration passes:

=================  ====================================================
phase              from, to
=================  ====================================================
``client_s``       the command's start; nova-api receives the POST
                   (its request log: end time less the request's time)
``api_s``          nova-api's request: the conductor's destination
                   check, in which the destination's Puma driver plans
                   the split and the sub host starts the memory server
``to_libvirt_s``   the answer; the source's driver calls libvirt (the
                   conductor's cast, ``pre_live_migration`` on the
                   destination)
``libvirt_s``      libvirt's migration call, until Nova's monitor sees
                   it return ("Migration operation has completed")
``post_s``         Nova's post-migration steps on both hosts, until
                   "Migrating instance to H finished successfully"
``status_s``       until the bench's poll of the cell database sees
                   ``completed`` (polls every 0.2 s)
=================  ====================================================

A phase whose marks are missing (a log line Nova's release does not
print) is None.
"""

import datetime
import os
import re

_STAMP = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ')
_POST_TIME = re.compile(r'"POST /v2\.1/servers/(?P<uuid>[0-9a-f-]+)/action" '
                        r'status: 202 .* time: (?P<s>[0-9.]+)')
# (log file, text of the line) for the source's and destination's marks.
_MARKS = {
    'libvirt_start': ('source', 'libvirt migration flags'),
    'libvirt_done': ('source', 'Migration operation has completed'),
    'post_done': ('source', 'finished successfully'),
}
PHASES = ('client_s', 'api_s', 'to_libvirt_s', 'libvirt_s', 'post_s',
          'status_s')


def _stamp(line):
    """The time of an oslo.log LINE (seconds since the epoch) or None."""
    m = _STAMP.match(line)
    if not m:
        return None
    return datetime.datetime.strptime(
        m.group(1), '%Y-%m-%d %H:%M:%S.%f').timestamp()


def _lines(path, start, end):
    """(time, line) of PATH's lines stamped within [START, END]."""
    if not os.path.exists(path):
        return
    with open(path, errors='replace') as f:
        for line in f:
            t = _stamp(line)
            if t is not None and start <= t <= end:
                yield t, line


def marks(log_dir, server, source, start, end):
    """The times of the marks of SERVER's migration from host SOURCE."""
    found = {}
    for t, line in _lines(os.path.join(log_dir, 'nova-api.log'), start,
                          end):
        m = _POST_TIME.search(line)
        if m and m.group('uuid') == server and 'api_end' not in found:
            found['api_end'] = t
            found['api_start'] = t - float(m.group('s'))
    src = os.path.join(log_dir, 'nova-compute-%s.log' % source)
    for t, line in _lines(src, start, end):
        for name, (_, text) in _MARKS.items():
            if text in line and name not in found:
                found[name] = t
    return found


def phases(found, start, end):
    """PHASES in seconds from the marks FOUND of a run [START, END]."""
    points = [start, found.get('api_start'), found.get('api_end'),
              found.get('libvirt_start'), found.get('libvirt_done'),
              found.get('post_done'), end]
    out = {}
    for name, a, b in zip(PHASES, points, points[1:]):
        out[name] = round(b - a, 3) if a is not None and b is not None \
            else None
    return out
