# SPDX-License-Identifier: Apache-2.0
"""Puma's Prometheus alert rules and Grafana dashboard pass promtool.

promtool comes with Debian's prometheus package (lab/setup deps).  The
dashboard's queries are checked as recording rules (with its $host
variable as a regular expression that matches every exporter), so a
query that Prometheus would refuse fails here.
"""

import json
import os
import shutil
import subprocess

import pytest

from puma_lab import paths

ETC = os.path.join(paths.TOP, 'nova_driver', 'etc')
ALERTS = os.path.join(ETC, 'prometheus', 'puma-alerts.yml')
DASHBOARD = os.path.join(ETC, 'grafana', 'puma-dashboard.json')


@pytest.fixture
def promtool():
    tool = shutil.which('promtool')
    if tool is None:
        pytest.fail('no promtool (Debian package prometheus: lab/setup deps)')
    return tool


def check(promtool, path):
    p = subprocess.run([promtool, 'check', 'rules', path],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_alert_rules(promtool):
    assert 'SUCCESS: 6 rules found' in check(promtool, ALERTS)


def test_dashboard_queries(promtool, tmp_path):
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t['expr'].replace('$host', '.*')
             for p in dash['panels'] for t in p['targets']]
    assert len(exprs) >= 10
    rules = tmp_path / 'dashboard.yml'
    rules.write_text('groups:\n  - name: dashboard\n    rules:\n' + ''.join(
        '      - record: dashboard:query%d\n        expr: %s\n'
        % (i, json.dumps(e)) for i, e in enumerate(exprs)))
    assert 'SUCCESS: %d rules found' % len(exprs) in check(promtool, rules)
    # Every metric the dashboard shows is one the exporter serves.
    for name in ('puma_split_state', 'puma_split_remote_bytes',
                 'puma_split_fault_latency_seconds_bucket',
                 'puma_migration_remaining_bytes',
                 'puma_shoot4u_hypercalls_total',
                 'puma_exporter_errors_total', 'puma_lending_hits_total',
                 'puma_lending_remote_bytes', 'puma_lending_hosted_bytes',
                 'puma_host_page_merging_saved_bytes',
                 'puma_memory_server_resident_bytes',
                 'puma_memory_server_put_pages_total',
                 'puma_memory_server_refused_requests_total'):
        assert any(name in e for e in exprs), name
