# SPDX-License-Identifier: Apache-2.0
"""Cache lending through the lab cloud, from the guests' own statistics.

Two servers of one project, the lender on host b and the borrower on
host a, both of a flavor with ``puma:lending=true`` and the Puma image
(the guest module installed, cloud_lending): each gets an interface on
its host's lending bridge, with the address the driver derives from its
uuid; the hosts' lending bridges meet on the lab's lending switch. Then,
with nothing but the cloud's own machinery:

- the borrower reads a file bigger than its page cache at random (fio),
  so that its guest counts refaults; the lender idles. nova-compute reads
  both guests' counters through their agents, reports them, and
  puma-scheduler pairs them (puma-api lists the pair);
- each host's nova-compute tells its guest of the pair (puma-pairs
  through the agent): the borrower connects to the lender on the other
  host over the lending channel,
  its evicted pages go to the lender and come back as hits, and the file
  still reads right;
- Prometheus (the cloud's, scraping each compute's puma-exporter, which
  reads the guests' module through their agents) shows the borrower's
  hits and the lender's hosted pages;
- the lender gets busy (stress-ng): its report says so, the pair is
  revoked, and both guests are told: the borrower has no lender left.
"""

import time

from puma_lab import cloud_checks as cc
from puma_lab import cloud_lending as cl
from puma_lab import cloud_monitoring as cm

LENDER_FLAVOR = 'puma.lender'
BORROWER_FLAVOR = 'puma.borrower'
FILE = '/mnt/data/f'
FILE_MB = 200
# The borrower's resident working set: its page cache holds less than the
# file, so random reads keep evicting and re-reading it.
HOG_MB = 160
BORROWER_MB = 384
PAIR_TIMEOUT = 300
# The lender's host and the borrower's: a pair across the lab's lending
# switch, each guest told by its own host's nova-compute.
LHOST, BHOST = 'b', 'a'


def _server(cloud, name, flavor, ram, host, ephemeral_gb=0):
    if not [f for f in cc.osc(cloud, 'flavor', 'list')
            if f['Name'] == flavor]:
        cc.osc(cloud, 'flavor', 'create', '--ram', str(ram), '--vcpus', '1',
               '--disk', '1', '--ephemeral', str(ephemeral_gb),
               '--property', 'puma:lending=true', flavor)
    server = cc.osc(cloud, 'server', 'create', '--flavor', flavor,
                    '--image', cl.IMAGE, *cc.nic_args(),
                    '--availability-zone', 'nova:' + host, '--wait', name)
    assert (server['status'], server['OS-EXT-SRV-ATTR:host']) == \
        ('ACTIVE', host), server
    domain = server['OS-EXT-SRV-ATTR:instance_name']
    cl.wait_agent(cloud, host, domain)
    return server['id'], domain


def _wait(what, check, timeout=PAIR_TIMEOUT):
    return cc.wait_for(what, check, timeout)


def test_lending_pair_from_real_statistics(cloud):
    cl.image(cloud)
    lender, ldom = _server(cloud, 'lender', LENDER_FLAVOR, 768, LHOST)
    # The image's root is an overlay on tmpfs: the borrower's file is on
    # its ephemeral disk, whose page cache Puma lends.
    borrower, bdom = _server(cloud, 'borrower', BORROWER_FLAVOR,
                             BORROWER_MB, BHOST, ephemeral_gb=1)
    try:
        # The lending interface: the driver's MAC, and the guest's
        # link-local address derived from it.
        xml = cc.virsh(cloud, LHOST, 'dumpxml', ldom)
        assert cl.lending_mac(lender) in xml, xml

        # Under TCG a get takes milliseconds: the borrower's RTT guard
        # would skip them (as the kmod tests, turned off; the defaults
        # are for KVM guests).
        cl.check(cloud, BHOST, bdom, 'modprobe puma && '
                 'pumactl set rtt_guard_us 0 && '
                 'pumactl set get_timeout_us 5000000')
        # Nova made the ephemeral disk an ext4 file system
        # (default_ephemeral_format).
        cl.check(cloud, BHOST, bdom, 'mkdir -p /mnt/data && '
                 'mount -t ext4 /dev/vdb /mnt/data')
        cl.check(cloud, BHOST, bdom, 'dd if=/dev/urandom of=%s bs=1M '
                 'count=%d status=none && sync' % (FILE, FILE_MB))
        cl.check(cloud, BHOST, bdom, 'memverify -m %d -r 2 -t 100000 '
                 '-p /run/hog >/dev/null 2>&1 &' % HOG_MB)
        cl.check(cloud, BHOST, bdom, 'for i in $(seq 120); do grep -q '
                 'state=running /run/hog 2>/dev/null && exit 0; sleep 1; '
                 'done; exit 1')
        want = cl.sha256_of(cloud, BHOST, bdom, FILE)
        cl.run(cloud, BHOST, bdom, 'fio --name=r --filename=%s --rw=randread '
               '--bs=4k --ioengine=psync --time_based --runtime=3600 '
               '--randrepeat=0 --norandommap --rate_iops=300 '
               '>/dev/null 2>&1' % FILE,
               wait=None)

        t0 = time.monotonic()
        _wait('a pair %s -> %s in puma-api' % (lender, borrower),
              lambda: (lender, borrower) in cl.pairs(cloud))
        print('paired after %.0f s' % (time.monotonic() - t0))
        assert cl.pairs(cloud) == {(lender, borrower)}

        # Told through the agents: the borrower reaches its lender.
        def hits():
            b = cl.counters(cloud, BHOST, bdom)
            return b['hits'] > 0 and b
        b = _wait('hits from the lender', hits)
        lc = cl.counters(cloud, LHOST, ldom)
        print('borrower: puts %d gets %d hits %d; lender: lend_puts %d '
              'lend_hits %d' % (b['puts'], b['gets'], b['hits'],
                                lc['lend_puts'], lc['lend_hits']))
        assert lc['lend_puts'] > 0 and lc['lend_hits'] > 0, lc
        assert cc.agent_read(cloud, LHOST, ldom,
                             '/sys/kernel/puma/role').strip() == 'lender'

        # The same figures in Prometheus, from each host's exporter.  The
        # remote and hosted bytes are gauges that go up and down: gets
        # take pages back (exclusive cache), and pages read sequentially
        # are not put again (sequential filter), so what counts is that
        # Prometheus saw them above zero since the pair began.
        for expr in ('puma_lending_hits_total{uuid="%s"} > 0' % borrower,
                     'max_over_time(puma_lending_remote_bytes{uuid="%s"}'
                     '[15m]) > 0' % borrower,
                     'puma_lending_lender_hits_total{uuid="%s"} > 0'
                     % lender,
                     'max_over_time(puma_lending_hosted_bytes{uuid="%s"}'
                     '[15m]) > 0' % lender):
            print(expr, cm.wait_query(cloud, expr))
        # Read after the figures: a sequential read of the whole file
        # marks its pages "do not put" (see above).
        assert cl.sha256_of(cloud, BHOST, bdom, FILE) == want
        b = cl.counters(cloud, BHOST, bdom)
        print('borrower after the read: remote_pages %d sequential_marks '
              '%d drop_sequential %d' % (b['remote_pages'],
                                         b['sequential_marks'],
                                         b['drop_sequential']))
        (labels, _), = cm.query(cloud, 'puma_lending_hosted_bytes{uuid="%s"}'
                                % lender)
        assert labels['domain'] == ldom, labels
        assert labels['instance'].startswith(
            cloud.state['hosts'][LHOST]['addr'] + ':'), labels
        # A busy TCG guest's agent may miss a scrape (counted): the
        # figures above came through all the same.
        print('guest agent errors:', cm.query(
            cloud, 'puma_exporter_guest_agent_errors_total'))

        # The lender gets busy: the pair goes, both guests are told.
        cl.run(cloud, LHOST, ldom, 'stress-ng --cpu 1 --timeout 900 '
               '>/dev/null 2>&1', wait=None)
        t0 = time.monotonic()
        _wait('the pair revoked', lambda: not cl.pairs(cloud))
        print('revoked after %.0f s' % (time.monotonic() - t0))
        _wait('the borrower told', lambda: cc.agent_read(
            cloud, BHOST, bdom, '/sys/kernel/puma/role').strip() == 'off')
        assert cc.agent_read(cloud, BHOST, bdom,
                             '/sys/kernel/puma/peers').strip() == ''
        assert cl.sha256_of(cloud, BHOST, bdom, FILE) == want
    finally:
        for name in ('lender', 'borrower'):
            cc.osc(cloud, 'server', 'delete', '--wait', name, fmt=False)
