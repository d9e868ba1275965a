# SPDX-License-Identifier: Apache-2.0
"""Split migration against upstream QEMU's precopy, hinting and post-copy.

Two scenarios (``--scenarios``): ``small-dest``, a destination too small
for the VM (:mod:`puma_lab.small_dest`), and ``freed``, described here.

One guest configuration (default 1 GiB) first fills 512 MiB (--freed)
with non-zero data and frees it, with free page reporting on (the guest
reports free memory, QEMU discards it), then runs ``memverify`` on a
working set larger than split mode's main-host limit, rewriting all of it
at a steady rate (-r MiB/s).  The same guest is booted afresh on host A
for each mode and migrated over QMP to host B:

- ``precopy``: plain precopy;
- ``hinted``: precopy with virtio-balloon free page hinting (an iothread,
  free-page-hint=on);
- ``postcopy``: precopy for one pass over memory, then post-copy;
- ``split``: x-split, cold pages to a memory server on host C;
- ``split-tls``: the same with the memory server over TLS (a PSK key of
  the VM's own, QEMU's x-split-tls-creds on both sides).

Per mode: total time and downtime (source ``query-migrate``), bytes on the
wire (bytes received by hosts B and C during the migration, from their
interface counters; QEMU's ``ram.transferred`` beside it), the guest
memory resident on the source when the migration starts ("used").  After
the migration the workload walks its working set twice more, then must
report no corrupt page: post-migration page-ins come from
``ram.postcopy-requests`` (post-copy) and ``x-query-split`` (split, with
its fault latency percentiles).  A mode the lab's QEMU cannot run is
reported as skipped with the reason and null figures.
"""

import argparse
import sys
import time
import uuid

from puma_lab import errors
from puma_lab import host as host_mod
from puma_lab import lab as lab_mod
from puma_lab import memserver
from puma_lab import migration
from puma_lab import paths
from puma_lab import qemu_mem
from puma_lab import qmp_migration
from puma_lab import small_dest
from puma_lab import swapfile
from puma_lab import vm

MODES = ('precopy', 'hinted', 'postcopy', 'split', 'split-tls')
SCENARIOS = ('small-dest', 'freed')
MIB = 1024 * 1024


def log(msg):
    print('split bench: %s' % msg, file=sys.stderr, flush=True)


def guest_used(guest):
    """MemTotal - MemFree inside the guest, bytes."""
    info = {}
    for line in guest.run('cat /proc/meminfo').out.splitlines():
        key, _, val = line.partition(':')
        info[key] = int(val.split()[0]) * 1024
    return info['MemTotal'] - info['MemFree']


def measure(lab, hosts, mode, args):
    a, b, c = hosts
    split = mode in ('split', 'split-tls')
    vm_id = str(uuid.uuid4())
    log('%s: booting a %d MiB guest on host a' % (mode, args.mem))
    src = vm.Guest(lab, '%s-a' % mode, kernel=args.kernel, mem_mb=args.mem,
                   vcpus=args.vcpus, ns=a.ns,
                   extra_args=['-uuid', vm_id] +
                   qmp_migration.balloon_args(mode == 'hinted',
                                              report=args.freed > 0))
    src.start().wait_booted()
    src.run('modprobe virtio_balloon')
    freed = used_and_freed(src, args.freed) if args.freed else {}
    pid = src.agent.spawn('exec memverify -m %d -t 36000 -r %d -p %s'
                          % (args.wss, args.rate, migration.PROGRESS))
    migration.wait_rounds(src.agent, 1, timeout=600)
    fig = {'used_bytes': qemu_mem.ram_resident(src),
           'guest_used_bytes': guest_used(src)}
    fig.update(freed)
    # The same cap for every mode, always explicit (0: none).  With
    # x-split it covers the pages PUT to the memory server too.
    params = {'max-bandwidth': args.bandwidth * MIB}
    if mode == 'postcopy':
        params['max-postcopy-bandwidth'] = args.bandwidth * MIB
    servers = []
    psk_dir = None
    if mode == 'split-tls':
        # The server's keys and the VM's own (the same line here).
        psk_dir = lab.path('psk-%s' % vm_id)
        memserver.write_psk(psk_dir, vm_id)
    if split:
        servers = [memserver.MemoryServer(c, max_mb=args.mem,
                                          psk_dir=psk_dir).start()]
        params['x-split-sub-uris'] = servers[0].uri
        params['x-split-main-limit'] = args.limit * MIB
    dst = qmp_migration.twin(src, '%s-b' % mode, b).start()
    qmp_migration.wait_qmp(dst)
    if psk_dir:
        for g in (src, dst):
            g.qmp('object-add', **{'qom-type': 'tls-creds-psk',
                                   'id': 'splitpsk', 'endpoint': 'client',
                                   'dir': psk_dir, 'username': vm_id})
            g.qmp('migrate-set-parameters',
                  **{'x-split-tls-creds': 'splitpsk'})
    rx0 = [h.link_bytes()[0] for h in (b, c)]
    log('%s: migrating (used %.0f MiB resident, %.0f MiB in the guest)'
        % (mode, fig['used_bytes'] / MIB, fig['guest_used_bytes'] / MIB))
    mig = qmp_migration.Migration(src, dst, b, mode, params).start()
    info = mig.wait(timeout=args.timeout)
    rx1 = [h.link_bytes()[0] for h in (b, c)]
    qmp_migration.wait_running(dst)
    ram = info.get('ram', {})
    fig.update({
        'total_ms': info.get('total-time'),
        'downtime_ms': info.get('downtime'),
        'setup_ms': info.get('setup-time'),
        'wire_bytes': sum(rx1) - sum(rx0),
        'ram_transferred': ram.get('transferred'),
        'dirty_syncs': ram.get('dirty-sync-count'),
    })
    ga = dst.agent
    if split:
        fig['split_at_switchover'] = dst.qmp('x-query-split')
    # The workload walks its whole working set twice on the destination.
    migration.wait_rounds(ga, migration.rounds(ga) + 2, timeout=600)
    if mode == 'postcopy':
        fig['pageins'] = mig.poll().get('ram', {}).get('postcopy-requests')
        dinfo = dst.qmp('query-migrate')
        fig['postcopy_blocktime_ms'] = dinfo.get('postcopy-blocktime')
    if split:
        state = dst.qmp('x-query-split')
        fig['split'] = state
        fig['pageins'] = state.get('page-ins')
        fig['unused_faults'] = state.get('unused-faults')
        # Percentiles of no fault at all are no figure.
        fig['remote_faults'] = sum(state.get('fault-latency-histogram', []))
        if fig['remote_faults']:
            fig['fault_p50_us'] = state.get('fault-latency-p50-us')
            fig['fault_p99_us'] = state.get('fault-latency-p99-us')
        fig['server_stats'] = [s.stats() for s in servers]
        fig.update(fresh_memory(ga, pid, dst, servers, args.fresh))
    ga.run('kill -TERM %d' % pid)
    verdict = ga.wait(pid, timeout=300)
    if verdict.rc != 0 or 'corrupt=0' not in verdict.out:
        raise errors.LabError('%s: memverify failed after migration: %s%s'
                              % (mode, verdict.out, verdict.err))
    fig['verify'] = verdict.out.strip()
    log('%s: %s' % (mode, {k: v for k, v in fig.items()
                           if k not in ('split', 'split_at_switchover')}))
    for g in (dst, src):
        g.stop()
    for s in servers:
        s.stop()
    return fig


def used_and_freed(guest, mib):
    """The guest fills MIB of memory with non-zero data, then frees it.

    memverify writes pseudo-random pages, checks them and exits; with
    free page reporting on, the guest reports the freed memory and QEMU
    discards it.  Waits until the RAM resident in QEMU stops falling.
    """
    guest.run('memverify -m %d -t 0' % mib, timeout=600)
    peak = qemu_mem.ram_resident(guest)
    prev, settled = peak, 0
    deadline = time.monotonic() + 120
    while settled < 3 and time.monotonic() < deadline:
        time.sleep(2)
        now = qemu_mem.ram_resident(guest)
        settled = settled + 1 if prev - now < 4 * MIB else 0
        prev = now
    log('guest wrote and freed %d MiB: %.0f MiB resident after, %.0f MiB '
        'once reported' % (mib, peak / MIB, prev / MIB))
    return {'freed_mb': mib, 'resident_after_free_bytes': peak,
            'resident_after_report_bytes': prev}


def fresh_memory(ga, pid, dst, servers, mib):
    """Touch MIB of memory the guest never used, the workload stopped.

    With memverify (PID) stopped, a short second memverify allocates (and
    checks) MIB of fresh memory: the guest hands out free pages, most of
    them never used, which the pager must zero-fill locally.

    ``unused_pageins``, over the whole life of the destination: pages the
    memory servers were asked for (their GET counters) that did not come
    in as page-ins (x-query-split counts only pages that were remote and
    came back), i.e. requests for pages the servers never held.
    """
    before = dst.qmp('x-query-split')
    ga.run('kill -STOP %d' % pid)
    try:
        ga.run('memverify -m %d -t 0' % mib, timeout=600)
        # Read the pager and the servers while the workload is stopped
        # and nothing is in flight (the same page-ins twice in a row),
        # or faults between the two reads count as requests for pages
        # the servers never held.
        after = None
        for _ in range(20):
            prev, after = after, dst.qmp('x-query-split')
            asked = sum(s.stats()['gets'] for s in servers)
            if prev and prev['page-ins'] == after['page-ins'] == asked:
                break
            time.sleep(0.2)
    finally:
        ga.run('kill -CONT %d' % pid)
    return {
        'fresh_unused_faults': after['unused-faults'] -
        before['unused-faults'],
        'fresh_pageins': after['page-ins'] - before['page-ins'],
        'unused_pageins': asked - after['page-ins'],
    }


def names(value, known, what):
    """The comma-separated names of VALUE, each one of KNOWN."""
    out = value.split(',')
    for n in out:
        if n not in known:
            raise errors.LabError('unknown %s %r (known: %s)'
                                  % (what, n, ', '.join(known)))
    return out


def ratio(num, den, digits=2):
    if num is None or not den:
        return None
    return round(num / den, digits)


def run(argv):
    ap = argparse.ArgumentParser(prog='lab/bench split')
    ap.add_argument('--mem', type=int, default=1024, help='guest MiB')
    ap.add_argument('--wss', type=int, default=384,
                    help='working set MiB rewritten by memverify')
    ap.add_argument('--rate', type=int, default=32,
                    help='MiB/s the working set is rewritten at')
    ap.add_argument('--limit', type=int, default=256,
                    help='split: main-host resident limit, MiB')
    ap.add_argument('--bandwidth', type=int, default=128,
                    help='migration bandwidth cap, MiB/s, every mode '
                    '(default: QEMU\'s own default; 0: none)')
    ap.add_argument('--vcpus', type=int, default=2)
    ap.add_argument('--kernel', default='6.12', choices=paths.KERNELS)
    ap.add_argument('--modes', default=','.join(MODES))
    ap.add_argument('--freed', type=int, default=512,
                    help='MiB the guest fills with data and frees before '
                    'the workload starts, free page reporting on (0: none)')
    ap.add_argument('--fresh', type=int, default=192,
                    help='split: MiB of never-used memory touched at the end')
    ap.add_argument('--timeout', type=int, default=900,
                    help='seconds a migration may take')
    ap.add_argument('--scenarios', default='small-dest,freed',
                    help='small-dest (a destination too small for the '
                    'VM) and/or freed (the modes above)')
    sd = ap.add_argument_group('small-dest')
    sd.add_argument('--small-modes', default=','.join(small_dest.MODES))
    sd.add_argument('--cold', type=int, default=448,
                    help='MiB written once, then left alone')
    sd.add_argument('--hot', type=int, default=96,
                    help='MiB rewritten at --small-rate')
    sd.add_argument('--small-rate', type=int, default=32,
                    help='MiB/s the hot set is rewritten at')
    sd.add_argument('--ratio', type=float, default=1.5,
                    help='used memory / destination RAM for guest memory')
    sd.add_argument('--swap', type=int, default=0,
                    help='MiB of swap file for the run (default: none)')
    sd.add_argument('--plot', metavar='SVG',
                    help='write the throughput timelines to SVG')
    sd.add_argument('--after', type=int, default=60,
                    help='seconds measured on the destination after the move')
    args = ap.parse_args(argv)
    modes = names(args.modes, MODES, 'mode')
    scenarios = names(args.scenarios, SCENARIOS, 'scenario')
    small_modes = names(args.small_modes, small_dest.MODES, 'small-dest mode')
    out = {'mem_mb': args.mem, 'wss_mb': args.wss, 'rate_mbs': args.rate,
           'freed_mb': args.freed,
           'limit_mb': args.limit, 'bandwidth_mbs': args.bandwidth,
           'kernel': args.kernel, 'qemu': paths.qemu_binary(),
           'skipped': {}}
    res = {}
    small = {}
    with lab_mod.Lab('bench-split') as lab:
        hosts = [host_mod.Host(lab, n, libvirtd=False).start()
                 for n in ('a', 'b', 'c')]
        if 'small-dest' in scenarios:
            out['small_swap_mb'] = args.swap
            out['small_ratio'] = args.ratio
            out['small_cold_mb'] = args.cold
            out['small_hot_mb'] = args.hot
            out['small_rate_mbs'] = args.small_rate
            with swapfile.SwapFile(lab.path('swap'), args.swap):
                for mode in small_modes:
                    small[mode] = small_dest.measure(
                        lab, hosts, mode, args, log)
            if args.plot:
                small_dest.plot(small, args.plot)
        for mode in (modes if 'freed' in scenarios else ()):
            why = (qmp_migration.split_missing()
                   if mode.startswith('split') else None)
            if why:
                log('split: skipped: %s' % why)
                out['skipped'][mode] = why
                continue
            res[mode] = measure(lab, hosts, mode, args)
    for mode in MODES:
        f = res.get(mode, {})
        name = mode.replace('-', '_')
        for key in ('total_ms', 'downtime_ms', 'wire_bytes',
                    'ram_transferred', 'used_bytes', 'pageins',
                    'resident_after_free_bytes',
                    'resident_after_report_bytes'):
            out['%s_%s' % (name, key)] = f.get(key)
        out['%s_bytes_x_used' % name] = ratio(f.get('wire_bytes'),
                                              f.get('used_bytes'))
    out['postcopy_blocktime_ms'] = res.get('postcopy', {}).get(
        'postcopy_blocktime_ms')
    s = res.get('split', {})
    out['split_unused_faults'] = s.get('unused_faults')
    out['split_remote_faults'] = s.get('remote_faults')
    out['split_at_switchover'] = s.get('split_at_switchover')
    out['split_state'] = s.get('split')
    out['split_servers'] = s.get('server_stats')
    out['bytes_x_used'] = out['split_bytes_x_used']
    out['time_x_precopy'] = ratio(s.get('total_ms'),
                                  res.get('precopy', {}).get('total_ms'))
    out['time_x_hinted_precopy'] = ratio(
        s.get('total_ms'), res.get('hinted', {}).get('total_ms'))
    out['downtime_x_hinted_precopy'] = ratio(
        s.get('downtime_ms'), res.get('hinted', {}).get('downtime_ms'))
    out['split_fresh_unused_faults'] = s.get('fresh_unused_faults')
    out['split_fresh_pageins'] = s.get('fresh_pageins')
    out['unused_pageins'] = s.get('unused_pageins')
    out['fault_p50_us'] = s.get('fault_p50_us')
    out['fault_p99_us'] = s.get('fault_p99_us')
    # The cost of TLS to the memory server, in the same run.
    t = res.get('split-tls', {})
    out['split_tls_unused_pageins'] = t.get('unused_pageins')
    out['tls_fault_p50_us'] = t.get('fault_p50_us')
    out['tls_fault_p99_us'] = t.get('fault_p99_us')
    out['tls_fault_p50_x_plain'] = ratio(t.get('fault_p50_us'),
                                         s.get('fault_p50_us'))
    out['tls_fault_p99_x_plain'] = ratio(t.get('fault_p99_us'),
                                         s.get('fault_p99_us'))
    out['tls_time_x_plain'] = ratio(t.get('total_ms'), s.get('total_ms'))
    out.update(small_dest.figures(small))
    return out
