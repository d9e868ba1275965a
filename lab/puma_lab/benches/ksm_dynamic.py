# SPDX-License-Identifier: Apache-2.0
"""The dynamic phase of lab/bench ksm: merging while guests boot and work.

For each KSM setting in turn, on the same kernel host: its knobs are
set and KSM runs (``run=1``, after ``run=2`` gave back what the previous
setting merged); then GUESTS fresh L2 guests start at once and boot
(``boot``), stay idle for ``--idle-s`` (``idle``), all run WORKLOAD at
once (``work``), and stay idle ``--after-s`` more (``after``: KSM merges
what the workload left).  Then they are shut down.  A thread samples
KSM's counters and ksmd's CPU every SAMPLE_EVERY seconds across the four
phases; the phase marks are the times each began.

WORKLOAD is a package install of the same files in every guest: it
packs the image's Python standard library (its sources only) into a
tarball, unpacks it and byte-compiles it, then checksums the unpacked
tree and the image's libraries, so the guests hold the same tarball,
tree and .pyc files (tmpfs) and the same page cache of the libraries:
shared file-backed pages made while KSM runs.

Figures per setting (``dyn_<setting>_*``): pages sharing and ksmd's
CPU seconds at the end of each phase, over the whole timeline
ksm_stats.summary()'s figures (``pages_sharing`` at the end,
``ksmd_cpu_s``, ``cpu_ms_per_page``, ``sharing_at_cpu``), the guests'
boot times and the workload's (each guest's own, in guest time), the
marks and the timeline.
"""

import shlex
import threading
import time

from puma_lab import agent
from puma_lab import errors
from puma_lab import kernel_host
from puma_lab import ksm_knobs
from puma_lab import ksm_stats

PHASES = ('boot', 'idle', 'work', 'after')
SAMPLE_EVERY = 5
WORKLOAD = (
    'set -e; d=/root/ksm-work; rm -rf $d /root/ksm-src.tar; mkdir -p $d; '
    'tar -C /usr/lib --exclude=__pycache__ -cf /root/ksm-src.tar '
    'python3.11; '
    'tar -C $d -xf /root/ksm-src.tar; '
    'python3 -m compileall -q $d >/dev/null; '
    'find $d /usr/lib/x86_64-linux-gnu -type f -print0 | sort -z | '
    'xargs -0 sha256sum > /root/ksm-work.sha; '
    'wc -l < /root/ksm-work.sha')


class Sampler:
    """KSM's counters every EVERY seconds, in a thread of its own.

    It makes KH's agent take one request at a time from then on.

    Times are seconds since the sampler started (``now()``); a sample
    that failed ends the thread, and ``stop()`` raises its error.
    """

    def __init__(self, kh, every, log):
        # The main thread asks the same agent meanwhile (the L2 guests'
        # agents are relayed by it).
        if not isinstance(kh.agent.transport, agent.SerializedTransport):
            kh.agent.transport = agent.SerializedTransport(
                kh.agent.transport)
        self.kh = kh
        self.every = every
        self.log = log
        self.error = None
        self.t0 = time.monotonic()
        self.samples = [ksm_knobs.sample(kh, self.t0)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def now(self):
        return time.monotonic() - self.t0

    def _loop(self):
        n = 1
        while not self._stop.wait(max(0, n * self.every - self.now())):
            try:
                s = ksm_knobs.sample(self.kh, self.t0)
            except errors.LabError as e:
                self.error = e
                return
            self.samples.append(s)
            self.log(s)
            n = int(self.now() / self.every) + 1

    def check(self):
        """Raise the error a sample failed with, if one did."""
        if self.error is None:
            return
        if not self.kh.answers():
            raise kernel_host.MachineFault(
                'kernel host %s does not answer: %s'
                % (self.kh.name, self.error))
        raise self.error

    def stop(self):
        """The samples, a last one taken now."""
        self._stop.set()
        self._thread.join()
        self.check()
        self.samples.append(ksm_knobs.sample(self.kh, self.t0))
        return self.samples


def phase_ends(samples, marks):
    """{phase: (pages_sharing, ksmd CPU s)} at the end of each phase.

    MARKS are (t, phase) in order; a phase ends where the next begins,
    the last with the last sample.  The value is that of the last sample
    taken by then (CPU from the first sample).
    """
    cpu0 = samples[0]['ksmd_cpu_s']
    ends = [t for t, _ in marks[1:]] + [samples[-1]['t']]
    out = {}
    for (_, phase), end in zip(marks, ends):
        last = samples[0]
        for s in samples:
            if s['t'] <= end:
                last = s
        out[phase] = (last['pages_sharing'],
                      round(last['ksmd_cpu_s'] - cpu0, 2))
    return out


def on_grid(samples, step):
    """pages_sharing every STEP seconds (the last sample by then)."""
    grid, i = [], 0
    end = samples[-1]['t']
    t = 0.0
    while t <= end + 1e-9:
        while i + 1 < len(samples) and samples[i + 1]['t'] <= t:
            i += 1
        grid.append(samples[i]['pages_sharing'])
        t += step
    return grid


# The workload runs in the background of each guest and leaves
# "rc t0 t1" (its exit status, its start and end in guest time) in
# WORK_RC: a status poll that its busy agent answers too late loses the
# result of a guest-exec (docs/lab.md, "Kernel hosts"), a file stays.
WORK_RC = '/root/ksm-work.rc'
START = ('rm -f %(rc)s; sh -c %(script)s </dev/null '
         '>/root/ksm-work.out 2>&1 &')
SCRIPT = ('t0=$(date +%%s.%%N); (%s); rc=$?; t1=$(date +%%s.%%N); '
          'echo "$rc $t0 $t1" > %s.tmp; mv %s.tmp %s')
POLL_EVERY = 10
# Polls in a row a guest may leave unanswered before it failed.
LATE_POLLS = 6


def _work_rc(text):
    """(rc, seconds) from WORK_RC's text, or None while it runs."""
    parts = text.split()
    if len(parts) != 3:
        return None
    return int(parts[0]), float(parts[2]) - float(parts[1])


def _poll(g):
    """WORK_RC's text in G, or None when its agent did not answer."""
    try:
        return g.run('cat %s 2>/dev/null; true' % WORK_RC, timeout=120).out
    except kernel_host.MachineFault:
        raise
    except errors.LabError:
        return None


def _work(guests, timeout, sampler):
    """WORKLOAD in every guest at once; the guests' times, in seconds."""
    script = SCRIPT % (WORKLOAD, WORK_RC, WORK_RC, WORK_RC)
    for g in guests:
        g.run(START % {'rc': WORK_RC, 'script': shlex.quote(script)})
    deadline = time.monotonic() + timeout
    times, late = {}, dict.fromkeys([g.name for g in guests], 0)
    while len(times) < len(guests):
        if time.monotonic() > deadline:
            raise errors.LabError('workload still running after %ds in %s'
                                  % (timeout, ', '.join(
                                      g.name for g in guests
                                      if g.name not in times)))
        time.sleep(POLL_EVERY)
        sampler.check()
        for g in guests:
            if g.name in times:
                continue
            text = _poll(g)
            if text is None:
                late[g.name] += 1
                if late[g.name] >= LATE_POLLS:
                    g.run('true', timeout=120)   # a machine fault, named
                    raise errors.LabError('%s: %d status polls in a row '
                                          'unanswered' % (g.name, late[
                                              g.name]))
                continue
            late[g.name] = 0
            done = _work_rc(text)
            if done is None:
                continue
            if done[0] != 0:
                out = g.run('tail -c 2000 /root/ksm-work.out',
                            check=False).out
                raise errors.LabError('%s: workload exited %d: %s'
                                      % (g.name, done[0], out))
            times[g.name] = round(done[1], 1)
    return [times[g.name] for g in guests]


def _wait(sampler, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sampler.check()
        time.sleep(min(1, max(0, deadline - time.monotonic())))


def measure(kh, name, knobs, guests_n, kernel, mem_mb, idle_s, after_s,
            work_timeout, log):
    """One setting's dynamic run on kernel host KH: its figures."""
    ksm_knobs.set_knobs(kh, {'run': 0})
    ksm_knobs.unmerge(kh)
    ksm_knobs.set_knobs(kh, knobs)
    ksm_knobs.set_knobs(kh, {'run': 1})

    def log_sample(s):
        log('ksm dyn %s: %5.0f s sharing %d shared %d scans %d ksmd %.1f s'
            % (name, s['t'], s['pages_sharing'], s.get('pages_shared', 0),
               s.get('full_scans', 0), s['ksmd_cpu_s']))

    sampler = Sampler(kh, SAMPLE_EVERY, log_sample)
    marks = [(0.0, 'boot')]
    guests = []
    try:
        for i in range(guests_n):
            guests.append(kernel_host.NestedGuest(
                kh, 'dyn-%s%d' % (name, i), kernel=kernel,
                mem_mb=mem_mb).start())
        for g in guests:
            g.wait_booted()
            sampler.check()
        boot_s = [round(g.boot_s, 1) for g in guests]
        log('ksm dyn %s: guests booted in %s s' % (name, boot_s))
        marks.append((round(sampler.now(), 1), 'idle'))
        _wait(sampler, idle_s)
        marks.append((round(sampler.now(), 1), 'work'))
        work_s = _work(guests, work_timeout, sampler)
        log('ksm dyn %s: workload took %s s' % (name, work_s))
        marks.append((round(sampler.now(), 1), 'after'))
        _wait(sampler, after_s)
        samples = sampler.stop()
    finally:
        sampler._stop.set()
        for g in guests:
            g.stop()
    ksm_knobs.set_knobs(kh, {'run': 0})
    fig = ksm_stats.summary(samples)
    for phase, (sharing, cpu) in phase_ends(samples, marks).items():
        fig['%s_sharing' % phase] = sharing
        fig['%s_cpu_s' % phase] = cpu
    fig.update({'boot_s': boot_s, 'work_s': work_s, 'marks': marks,
                'grid': on_grid(samples, SAMPLE_EVERY),
                'timeline': [(round(s['t']), s['pages_sharing'])
                             for s in samples]})
    return fig


KEYS = ('pages_sharing', 'pages_shared', 'ksmd_cpu_s', 'cpu_ms_per_page',
        'full_scans', 'duration_s', 'pages_to_scan_end', 'boot_s', 'work_s',
        'marks', 'sharing_at_cpu', 'timeline') + tuple(
            '%s_%s' % (p, k) for p in PHASES for k in ('sharing', 'cpu_s'))


def figures(fig, results):
    """``dyn_<setting>_<key>`` of RESULTS into FIG."""
    for n, r in results.items():
        for key in KEYS:
            fig['dyn_%s_%s' % (n, key)] = r[key]


def plot_series(results):
    """(series, marks) for svgplot.lines: pages sharing over time.

    Marks are every setting's phase starts but the first (0 s), labelled
    with the setting's initial.
    """
    series = {n: r['grid'] for n, r in results.items()}
    marks = [(t, '%s %s' % (n[0], phase)) for n, r in results.items()
             for t, phase in r['marks'][1:]]
    return series, marks
