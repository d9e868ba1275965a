# SPDX-License-Identifier: Apache-2.0
"""Split bench, scenario 1: a destination too small for the VM.

The guest has used more memory than the destination can give it: a cold
region (written once, then left alone, as an idle application's heap)
and a hot working set rewritten at a steady rate, both checksummed by
``memverify``.  The destination's free RAM for guest memory is the
guest's used memory divided by ``--ratio`` (1.5 by default); its QEMU
runs in a memory cgroup limited to that plus the QEMU process's own
overhead measured on the source, as an operator would bound it.  Without
swap (the default, as on many compute hosts) the kernel kills a QEMU
that needs more; with ``--swap MIB`` a swap file takes what the cgroup
cannot hold.

Modes, each on a freshly booted guest:

- ``room``: precopy to a destination without a limit, the reference for
  the guest's throughput after the move;
- ``precopy`` and ``postcopy`` into the limited destination;
- ``split``: the resident limit is the destination's free RAM, the rest
  goes to a memory server on host C.

Per mode: whether it succeeded (the migration completed, the destination
QEMU was not OOM-killed, and both checkers found every page intact
afterwards, the cold region checked after the minute of paging), the
cgroup's peak resident memory against its limit and the swap it used,
bytes received by hosts B and C from the start until a minute after the
move, the hot workload's throughput over time (MiB/s in 10 s bins, from
the migration's start) and in the minute after the move, total time and
downtime.  When a mode fails, the source must still run with its
memory intact.
"""

import time
import uuid

from puma_lab import errors
from puma_lab import memcg
from puma_lab import memserver
from puma_lab import migration
from puma_lab import qemu_mem
from puma_lab import qmp_migration
from puma_lab import svgplot
from puma_lab import vm

MODES = ('room', 'precopy', 'postcopy', 'split')
MIB = 1024 * 1024
HOT = '/run/hot.progress'
COLD = '/run/cold.progress'
BIN_S = 10


class Timeline:
    """Samples of (seconds since T0, rounds) of a memverify of MIB."""

    def __init__(self, t0, mib):
        self.t0 = t0
        self.mib = mib
        self.samples = []

    def sample(self, ga):
        """One sample.

        None while the guest's agent does not answer (a source paused for
        its switchover).
        """
        try:
            out = ga.run('cat %s' % HOT, timeout=3, check=False).out
        except errors.LabError:
            return
        n = migration.parse_rounds(out, ga.name)
        if n:
            self.samples.append((time.monotonic() - self.t0, n))

    def rate(self, start, end):
        """Average MiB/s between the samples nearest START and END."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return ((inside[-1][1] - inside[0][1]) * self.mib /
                (inside[-1][0] - inside[0][0]))

    def bins(self):
        """MiB/s every BIN_S seconds from T0.

        Each is averaged over the 2 * BIN_S seconds around the bin (rounds
        end every few seconds); None where fewer than two samples fall in
        that window.
        """
        if not self.samples:
            return []
        out = []
        last = self.samples[-1][0]
        t = 0.0
        while t < last:
            r = self.rate(t - BIN_S / 2, t + BIN_S * 1.5)
            out.append(None if r is None else round(r, 1))
            t += BIN_S
        return out


def measure(lab, hosts, mode, args, log):
    a, b, c = hosts
    vm_id = str(uuid.uuid4())
    log('small-dest %s: booting a %d MiB guest on host a' % (mode, args.mem))
    src = vm.Guest(lab, 'sd-%s-a' % mode, kernel=args.kernel,
                   mem_mb=args.mem, vcpus=args.vcpus, ns=a.ns,
                   extra_args=['-uuid', vm_id])
    src.start().wait_booted()
    ga = src.agent
    cold = ga.spawn('exec memverify -m %d -t 36000 -p %s'
                    % (args.cold, COLD))
    migration.wait_rounds(ga, 1, timeout=600, path=COLD)
    ga.run('kill -STOP %d' % cold)
    hot = ga.spawn('exec memverify -m %d -t 36000 -r %d -p %s'
                   % (args.hot, args.small_rate, HOT))
    migration.wait_rounds(ga, 2, timeout=600, path=HOT)
    used = qemu_mem.ram_resident(src)
    overhead = qemu_mem.rss(src.proc.pid) - used
    dest_ram = int(used / args.ratio)
    fig = {'used_bytes': used, 'qemu_overhead_bytes': overhead,
           'dest_ram_bytes': dest_ram}
    params = {'max-bandwidth': args.bandwidth * MIB}
    if mode == 'postcopy':
        params['max-postcopy-bandwidth'] = args.bandwidth * MIB
    servers = []
    if mode == 'split':
        servers = [memserver.MemoryServer(c, max_mb=args.mem).start()]
        params['x-split-sub-uris'] = servers[0].uri
        params['x-split-main-limit'] = dest_ram
    dst = qmp_migration.twin(src, 'sd-%s-b' % mode, b).start()
    cg = None
    if mode != 'room':
        cg = memcg.MemoryCgroup('puma-%s-%s' % (lab.num, mode),
                                dest_ram + overhead).create()
        cg.add(dst.proc.pid)
        fig['limit_bytes'] = cg.limit
    try:
        qmp_migration.wait_qmp(dst)
        fig.update(migrate(src, dst, b, c, mode, params, cg, args, log,
                           hot, cold))
    finally:
        for g in (dst, src):
            g.stop()
        for s in servers:
            s.stop()
        if cg:
            cg.remove()
    log('small-dest %s: %s' % (mode, {k: v for k, v in fig.items()
                                      if k != 'timeline_mibs'}))
    return fig


def migrate(src, dst, b, c, mode, params, cg, args, log, hot, cold):
    fig = {'ok': False}
    rx0 = sum(h.link_bytes()[0] for h in (b, c))
    t0 = time.monotonic()
    tl = Timeline(t0, args.hot)
    # 'room' is a precopy, to a destination without a limit.
    mig = qmp_migration.Migration(src, dst, b,
                                  'precopy' if mode == 'room' else mode,
                                  params).start()
    log('small-dest %s: migrating' % mode)
    info, moved = None, None
    deadline = t0 + args.timeout
    next_sample = 0
    while time.monotonic() < deadline:
        try:
            info = mig.poll()
        except errors.LabError as e:
            info = {'status': 'failed', 'error-desc': str(e)}
        status = info.get('status')
        if status in qmp_migration.DONE:
            break
        if cg and cg.oom_kills():
            info = {'status': 'failed',
                    'error-desc': 'destination QEMU OOM-killed'}
            break
        if time.monotonic() >= next_sample:
            # The guest runs on the destination once post-copy started.
            tl.sample(dst.agent if mig.postcopy_started else src.agent)
            next_sample = time.monotonic() + 2
        time.sleep(0.2)
    status = (info or {}).get('status')
    fig['status'] = status
    if status != 'completed':
        fig['error'] = (info or {}).get('error-desc', 'not done in %ds'
                                        % args.timeout)
        if cg and cg.oom_kills():
            fig['error'] += ' (the destination QEMU was OOM-killed)'
        if status not in qmp_migration.DONE:
            mig.cancel()
        log('small-dest %s: failed: %s' % (mode, fig['error']))
        fig.update(source_intact(src, hot, cold))
        fig.update(cgroup_figures(cg))
        return fig
    moved = time.monotonic() - t0
    fig.update({'total_ms': info.get('total-time'),
                'downtime_ms': info.get('downtime'),
                'moved_s': round(moved, 1)})
    qmp_migration.wait_running(dst)
    # A minute of the guest on the destination, sampled.
    end = time.monotonic() + args.after
    while time.monotonic() < end:
        tl.sample(dst.agent)
        if cg and cg.oom_kills():
            break
        time.sleep(2)
    fig['after_mibs'] = tl.rate(moved, moved + args.after)
    if fig['after_mibs'] is not None:
        fig['after_mibs'] = round(fig['after_mibs'], 1)
    fig['wire_bytes'] = sum(h.link_bytes()[0] for h in (b, c)) - rx0
    fig['timeline_mibs'] = tl.bins()
    if mode == 'split':
        state = dst.qmp('x-query-split')
        fig['pageins'] = state.get('page-ins')
        fig['pageouts'] = state.get('page-outs')
        fig['resident_pages'] = state.get('resident-pages')
        fig['fault_p50_us'] = state.get('fault-latency-p50-us')
        fig['fault_p99_us'] = state.get('fault-latency-p99-us')
    fig.update(cgroup_figures(cg))
    if cg and cg.oom_kills():
        fig['error'] = 'destination QEMU OOM-killed after the move'
        return fig
    fig.update(verify(dst.agent, hot, cold))
    fig['ok'] = fig['hot_ok'] and fig['cold_ok']
    return fig


def cgroup_figures(cg):
    if not cg:
        return {}
    # The cgroup keeps resident memory at its limit; what the process
    # needed shows in resident plus swapped memory.
    needed = cg.peak_with_swap()
    return {'peak_bytes': cg.peak(), 'peak_with_swap_bytes': needed,
            'swap_bytes': cg.swap(), 'oom_kills': cg.oom_kills(),
            'peak_x_limit': round(needed / cg.limit, 2)}


def verify(ga, hot, cold):
    """Both checkers end with a full check, the cold one after its pause."""
    out = {}
    ga.run('kill -CONT %d' % cold)
    for what, pid in (('hot', hot), ('cold', cold)):
        ga.run('kill -TERM %d' % pid)
        res = ga.wait(pid, timeout=900)
        out['%s_ok' % what] = res.rc == 0 and 'corrupt=0' in res.out
        out['%s_verify' % what] = (res.out + res.err).strip()
    return out


def source_intact(src, hot, cold):
    """After a failed migration: the source runs and its memory is right."""
    try:
        st = qmp_migration.wait_running(src, timeout=60)
    except errors.LabError as e:
        return {'source_running': False, 'source_error': str(e)}
    res = verify(src.agent, hot, cold)
    return {'source_running': bool(st.get('running')),
            'source_intact': res['hot_ok'] and res['cold_ok']}


def figures(res):
    """The JSON keys of scenario 1 from RES, {mode: figures}."""
    out = {}
    for mode in MODES:
        f = res.get(mode, {})
        for key in ('ok', 'status', 'error', 'total_ms', 'downtime_ms',
                    'moved_s', 'wire_bytes', 'used_bytes', 'limit_bytes',
                    'peak_bytes', 'peak_with_swap_bytes', 'peak_x_limit',
                    'swap_bytes', 'oom_kills',
                    'after_mibs', 'timeline_mibs', 'pageins', 'pageouts',
                    'source_running', 'source_intact'):
            if key in f:
                out['small_%s_%s' % (mode, key)] = f[key]
        if f.get('wire_bytes') and f.get('used_bytes'):
            out['small_%s_bytes_x_used' % mode] = round(
                f['wire_bytes'] / f['used_bytes'], 2)
    s, room = res.get('split', {}), res.get('room', {})
    out['precopy_ok_small_dest'] = res.get('precopy', {}).get('ok')
    out['postcopy_ok_small_dest'] = res.get('postcopy', {}).get('ok')
    out['split_ok_small_dest'] = s.get('ok')
    out['peak_dest_x_limit'] = s.get('peak_x_limit')
    out['small_split_fault_p50_us'] = s.get('fault_p50_us')
    out['small_split_fault_p99_us'] = s.get('fault_p99_us')
    if s.get('after_mibs') is not None and room.get('after_mibs'):
        out['throughput_after_x_full'] = round(
            s['after_mibs'] / room['after_mibs'], 2)
    else:
        out['throughput_after_x_full'] = None
    return out


def plot(res, path):
    """The hot set's throughput timelines of RES as an SVG at PATH."""
    series = {mode: res[mode].get('timeline_mibs') or []
              for mode in MODES if mode in res}
    marks = [(res[m]['moved_s'], '%s moved' % m) for m in ('split',)
             if res.get(m, {}).get('moved_s')]
    with open(path, 'w') as f:
        f.write(svgplot.lines(
            series, BIN_S, 'Hot set throughput, destination too small',
            'seconds since the migration started', 'MiB/s', marks))
