# SPDX-License-Identifier: Apache-2.0
"""cloud_phases on log lines as the lab cloud's services wrote them."""

import datetime

from puma_lab.benches import cloud_phases

UUID = '4f1d546e-6ad1-48a4-af90-3e35450fb88b'
REQ = '[None req-ac3c559d - - default default] '
API = [
    # Another server's request, and a GET: not this migration's.
    '2026-11-29 04:31:50.100 28296 INFO nova.api.openstack.requestlog '
    + REQ + '10.77.0.11 "POST /v2.1/servers/0000aaaa-6ad1-48a4-af90-'
    '3e35450fb88b/action" status: 202 len: 0 microversion: 2.30 time: '
    '0.1\n',
    '2026-11-29 04:31:50.928 28296 INFO nova.api.openstack.requestlog '
    + REQ + '10.77.0.11 "POST /v2.1/servers/%s/action" status: 202 len: '
    '0 microversion: 2.30 time: 0.452695\n' % UUID,
    '[pid: 28296|app: 0|req: 51/51] 10.77.0.11 () {38 vars in 828 bytes} '
    '[Sun Nov 29 04:31:50 2026] POST /v2.1/servers/%s/action => '
    'generated 0 bytes in 456 msecs (HTTP/1.1 202)\n' % UUID,
]
SOURCE = [
    '2026-11-29 04:31:51.610 28403 INFO nova.compute.manager ' + REQ
    + 'Took 0.58 seconds for pre_live_migration on destination host b.\n',
    '2026-11-29 04:31:51.649 28403 INFO puma_nova.virt.split ' + REQ
    + 'Split migration of vm-1: libvirt migration flags 0x20009b\n',
    '2026-11-29 04:31:54.206 28403 INFO nova.virt.libvirt.driver ' + REQ
    + 'Migration operation has completed\n',
    '2026-11-29 04:31:54.587 28403 INFO nova.compute.manager ' + REQ
    + 'Migrating instance to b finished successfully.\n',
    # The next run's: outside the window.
    '2026-11-29 04:32:02.183 28403 INFO nova.virt.libvirt.driver ' + REQ
    + 'Migration operation has completed\n',
]


def _t(text):
    return datetime.datetime.strptime(
        text, '%Y-%m-%d %H:%M:%S.%f').timestamp()


def test_phases_of_a_split_through_the_api(tmp_path):
    (tmp_path / 'nova-api.log').write_text(''.join(API))
    (tmp_path / 'nova-compute-a.log').write_text(''.join(SOURCE))
    start = _t('2026-11-29 04:31:49.400')
    end = _t('2026-11-29 04:31:54.700')
    found = cloud_phases.marks(str(tmp_path), UUID, 'a', start, end)
    got = cloud_phases.phases(found, start, end)
    assert list(got) == list(cloud_phases.PHASES)
    assert got == {'client_s': 1.075, 'api_s': 0.453,
                   'to_libvirt_s': 0.721, 'libvirt_s': 2.557,
                   'post_s': 0.381, 'status_s': 0.113}, got
    # The phases add up to the whole run.
    assert abs(sum(got.values()) - (end - start)) < 0.005


def test_missing_marks_are_none(tmp_path):
    (tmp_path / 'nova-compute-a.log').write_text(''.join(SOURCE[:2]))
    start = _t('2026-11-29 04:31:49.400')
    end = _t('2026-11-29 04:31:54.700')
    found = cloud_phases.marks(str(tmp_path), UUID, 'a', start, end)
    got = cloud_phases.phases(found, start, end)
    assert got['client_s'] is None and got['api_s'] is None
    assert got['to_libvirt_s'] is None
    assert got['libvirt_s'] is None and got['post_s'] is None
    assert got['status_s'] is None
