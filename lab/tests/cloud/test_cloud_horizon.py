# SPDX-License-Identifier: Apache-2.0
"""Horizon's Puma panel in a real browser, against the lab cloud.

Debian's Chromium (headless, driven by Selenium in the control
namespace: puma_lab.horizon) logs in to the cloud's Horizon, opens
Admin > Puma > Memory Pool while a split migration runs, and clicks
through its tabs.  The panel shows the running split and its memory
server from the real puma-api, and the running live migration from
Nova with its progress and its split; its Abort button (confirmed in
Horizon's dialog) cancels the migration through Nova's API and the
server stays on its host; the browser's console logs no error; a
member of the demo project does not get the panel.  Screenshots are kept
in $PUMA_LOGS/horizon (.lab-logs/horizon of the checkout under tox).
"""

import os

from puma_lab import cloud_checks as cc
from puma_lab import horizon


def shots_dir(cloud, name):
    return os.path.join(os.environ.get('PUMA_LOGS') or cloud.path('log'),
                        'horizon', name)


def rows_with(table, text):
    return [row for row in table if text in row]


def test_panel_shows_a_running_split_migration(cloud, small_b, require):
    require('Chromium for the Horizon test', horizon.missing())
    uuid, name, rounds = cc.split_server(cloud, 'vm9')
    mig = cc.slow_split(cloud, name, uuid, small_b)
    mig_row = '%s:%s' % (uuid, mig['Id'])
    try:
        # Nova's monitor saves the progress every few seconds.
        cc.wait_for('Nova\'s progress of the split', lambda: cc.osc(
            cloud, 'puma', 'migration', 'show', uuid)['Memory Total MB'],
            cc.SERVER_TIMEOUT)
        seen = horizon.browse(cloud, shots_dir(cloud, 'admin'), press={
            'table': 'live_migrations', 'row': mig_row, 'action': 'abort'})
        # The demo project's member logs in; the admin panel is not his.
        member = horizon.browse(cloud, shots_dir(cloud, 'demo'),
                                user='demo')
    finally:
        # The panel's Abort button did it, or the test does.
        if [m for m in cc.migrations(cloud, uuid)
                if m['Status'] in ('queued', 'preparing', 'running')]:
            cc.osc(cloud, '--os-compute-api-version', '2.24', 'server',
                   'migration', 'abort', uuid, str(mig['Id']), fmt=False)
        cancelled = cc.wait_for('the migration to be cancelled', lambda: [
            m for m in cc.migrations(cloud, uuid)
            if m['Status'] == 'cancelled'], cc.SERVER_TIMEOUT)
    try:
        print('Horizon as admin: %s' % {k: v for k, v in seen.items()
                                        if k != 'console'})
        print('console: %s' % seen['console'])
        print('Horizon as demo: %s' % member)
        assert 'error' not in seen, seen
        assert seen['heading'] == 'Memory Pool', seen
        assert seen['tabs'] == ['Lending Pairs', 'Split Migrations',
                                'Memory Servers', 'Live Migrations',
                                'Hosts'], seen
        tables = seen['tables']
        # Every compute's last report, with what its page merging saves
        # (a number of MiB; the hosts share this machine's KSM).
        assert sorted(row[0] for row in tables['hosts']) == \
            ['a', 'b', 'c'], tables['hosts']
        assert all(row[4].isdigit() for row in tables['hosts']), \
            tables['hosts']
        # The split that ran then, as puma-api has it.
        assert [row[1:3] + row[5:6] for row in rows_with(
            tables['ledger'], uuid)] == [['b', 'c', 'running']], tables
        assert [row[1:2] + row[3:4] for row in rows_with(
            tables['memory_servers'], uuid)] == [['c', 'active']], tables
        # The running live migration, from Nova, with its split: kind,
        # status, source and destination, then main and sub host.
        (live,) = rows_with(tables['live_migrations'], uuid)
        assert live[1:5] + live[7:9] == [
            'split', 'running', 'a', 'b', 'b', 'c'], tables
        assert int(live[5]) > 0 and int(live[9]) > 0, live
        # Its Abort button: Horizon's confirmation, Nova's abort, the
        # migration cancelled (by the button: the test had nothing left
        # to abort).
        assert [m for m in seen['pressed']
                if 'Aborted Live Migration' in m and
                'Success' in m], seen['pressed']
        assert [m['Id'] for m in cancelled] == [mig['Id']], cancelled
        # No lending pair in this cloud: Horizon's empty table.
        assert tables['pairs'] == [['No items to display.']], tables
        assert [e for e in seen['console']
                if e['level'] == 'SEVERE'] == [], seen['console']
        # login, home, panel, five tabs, the confirmation, after it.
        assert len(seen['screenshots']) == 10, seen['screenshots']
        assert 'error' not in member, member
        assert member['heading'] != 'Memory Pool', member
        assert 'ledger' not in member['tables'], member
        # Horizon answered the member's request for the panel with 403.
        assert [e for e in member['console'] if e['level'] == 'SEVERE' and
                horizon.PANEL_URL in e['message'] and
                '403 (Forbidden)' in e['message']], member['console']
        cc.stays_on_a(cloud, uuid, name, rounds)
    finally:
        cc.discard(cloud, uuid)
    cc.released(cloud, uuid)
