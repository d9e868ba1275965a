# SPDX-License-Identifier: Apache-2.0
"""puma-exporter, scraped by a real Prometheus server, and Puma's alerts.

A guest is split-migrated through libvirt from host A to host B with its
memory server on host C (as in test_split.py).  B runs puma-exporter
against its libvirtd (with monitor details), A runs Debian's prometheus
with Puma's alert rules (nova_driver/etc/prometheus/puma-alerts.yml),
scraping every second.  Prometheus must see the split VM's figures, from
libvirt's split statistics and from QEMU; PumaSplitPaused must fire while
C's link is cut (QEMU pauses the guest) and end once it is back; the
guest's memory must verify throughout.
"""

from puma_lab import memserver
from puma_lab import prometheus
from puma_lab import split

MEM_MB = 512
WSS_MB = 160
RATE = 32
LIMIT = 128 << 20
ALERTS = {'PumaSplitPaused', 'PumaSplitMirrorDegraded',
          'PumaMemoryServerDown', 'PumaExporterErrors', 'PumaLenderThrashing',
          'PumaMemoryServerRestarted'}


def test_prometheus_sees_a_split_vm_and_its_lost_server(lab, require):
    require('split migration through virsh', split.missing('virsh'))
    require('puma-exporter and Prometheus', prometheus.missing())
    a, b, c = split.make_hosts(lab, 'virsh', ('a', 'b', 'c'))
    srv = memserver.MemoryServer(c).start()
    g = split.make_guest('virsh', lab, a, 'vm-prom', mem_mb=MEM_MB)
    pid = split.start_workload(g, WSS_MB, RATE)
    g.migrate(b, [srv], LIMIT)
    split.walk(g, 1)

    exporter = prometheus.Exporter(b).start()
    prom = prometheus.Prometheus(a, [exporter.target]).start()
    vm = '{domain="vm-prom"}'
    for expr in ('puma_split_state{domain="vm-prom",state="active"} == 1',
                 'puma_split_remote_bytes%s > 0' % vm,
                 'puma_split_resident_bytes%s > 0' % vm,
                 'puma_split_page_ins_total%s > 0' % vm,
                 # From QEMU (monitor details): the latency histogram and
                 # the memory server, which is up.
                 'puma_split_fault_latency_seconds_bucket'
                 '{domain="vm-prom",le="+Inf"} > 0',
                 'puma_split_memory_server_up%s == 1' % vm):
        print(expr, prom.wait_query(expr))
    (labels, _), = prom.query('puma_split_remote_bytes%s' % vm)
    assert labels['uuid'] == b.virsh('domuuid', 'vm-prom').strip(), labels
    assert labels['instance'] == exporter.target, labels
    rules = {r['name']: r['health'] for grp in prom.api('rules')['groups']
             for r in grp['rules']}
    assert set(rules) == ALERTS and set(rules.values()) == {'ok'}, rules
    assert prom.firing() == []

    c.set_link(False)
    try:
        prom.wait_firing('PumaSplitPaused', timeout=180)
        print('firing:', prom.firing())
        # libvirt's state, from QEMU's event: QEMU's monitor may wait
        # for a page of C (its main loop reading guest memory).
        assert g.state_reason() == 'paused (memory server lost)'
    finally:
        c.set_link(True)
    prom.wait_query('puma_split_state{domain="vm-prom",state="active"} '
                    '== 1', timeout=300)
    prom.wait_query('absent(ALERTS{alertname="PumaSplitPaused",'
                    'alertstate="firing"})', timeout=120)
    # B's pager reconnected and fenced its connection from before the
    # cut (QEMU patches 51-54), whose unread requests must never run.
    fences = [line for line in srv.output().splitlines()
              if 'FENCE vm ' in line]
    print('memory server:', fences)
    assert fences, srv.output()[-3000:]
    split.walk(g, 1)
    res = split.stop_workload(g, pid)
    print('memverify:', res.out.strip())
    assert res.rc == 0 and 'corrupt=0' in res.out, res
