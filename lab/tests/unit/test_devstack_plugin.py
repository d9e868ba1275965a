# SPDX-License-Identifier: Apache-2.0
"""devstack/plugin.sh and lib/puma: what each phase does on each node.

devstack itself needs systemd as PID 1 and a non-root user, which this
machine does not have (devstack/README.md), so the plugin runs here with
devstack's own functions (iniset, setup_develop, run_process, ...)
replaced by stubs that log their calls; lib/puma's functions are the
real ones.  One row per node kind and phase: the calls devstack would
see, in order.
"""

import os
import subprocess

import pytest

from puma_lab import paths

PLUGIN = os.path.join(paths.TOP, 'devstack', 'plugin.sh')

# devstack's functions that lib/puma and plugin.sh call: each logs
# "NAME ARGS" to $CALLS; is_service_enabled answers from $SERVICES.
STUBS = r'''
log() { echo "$*" >> "$CALLS"; }
is_service_enabled() {
    local s
    for s in "$@"; do
        [[ " $SERVICES " == *" $s "* ]] && return 0
    done
    return 1
}
get_python_exec_prefix() { echo "$BIN"; }
ipv6_unquote() { echo "$1"; }
get_transport_url() { echo rabbit://stackrabbit@ctl:5672/; }
database_connection_url() { echo "mysql+pymysql://root@ctl/$1"; }
echo_summary() { :; }
warn() { log warn; }
die() { log die "$@"; exit 1; }
# devstack's run_process starts only enabled services.
run_process() { is_service_enabled "$1" && log run_process "$@"; }
for f in setup_develop iniset configure_keystone_authtoken_middleware \
         create_service_user get_or_create_service get_or_create_endpoint \
         recreate_database stop_process wait_for_service sudo; do
    eval "$f() { log $f \"\$@\"; }"
done
'''

# As devstack/settings leaves them (it enables puma-compute-agent).
CONTROLLER = ('keystone mysql rabbit n-api n-cpu puma-scheduler puma-api '
              'puma-compute-agent horizon')
COMPUTE = 'n-cpu placement-client puma-compute-agent'
OTHER = 'keystone mysql rabbit n-api'


def run_phase(tmp_path, services, *phase):
    """The calls plugin.sh makes for PHASE on a node running SERVICES."""
    calls = tmp_path / 'calls'
    calls.write_text('')
    bindir = tmp_path / 'bin'
    bindir.mkdir(exist_ok=True)
    manage = bindir / 'puma-manage'
    manage.write_text('#!/bin/sh\necho "puma-manage $*" >> "$CALLS"\n')
    manage.chmod(0o755)
    nova = tmp_path / 'nova'
    (nova / 'nova' / 'virt').mkdir(parents=True, exist_ok=True)
    horizon = tmp_path / 'horizon'
    (horizon / 'openstack_dashboard' / 'local' / 'enabled').mkdir(
        parents=True, exist_ok=True)
    env = dict(os.environ, CALLS=str(calls), SERVICES=services,
               BIN=str(bindir), NOVA_DIR=str(nova), HORIZON_DIR=str(horizon),
               NOVA_CONF=str(tmp_path / 'nova.conf'),
               PUMA_CONF_DIR=str(tmp_path / 'etc-puma'), SERVICE_HOST='ctl',
               SERVICE_PROTOCOL='http', STACK_USER='stack',
               REGION_NAME='RegionOne', SERVICE_TIMEOUT='60',
               KEYSTONE_SERVICE_URI='http://ctl/identity',
               SERVICE_PASSWORD='secret', SERVICE_PROJECT_NAME='service',
               SERVICE_DOMAIN_NAME='Default', ENABLE_DEBUG_LOG_LEVEL='True')
    p = subprocess.run(['bash', '-c', STUBS + '\nsource "$0" "$@"',
                        PLUGIN] + list(phase),
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    out = []
    for line in calls.read_text().splitlines():
        words = line.split()
        if words[0] == 'iniset':  # which file
            words[1:] = [os.path.basename(words[1])]
        elif words[0] == 'setup_develop':  # which extras
            words[1:] = words[2:3]
        elif words[0] != 'run_process':
            del words[1:]
        out.append(' '.join(words[:2]))
    return out


@pytest.mark.parametrize('services,phase,want', [
    # The controller: everything.
    (CONTROLLER, ('stack', 'install'),
     ['setup_develop compute,controller,client']),
    (CONTROLLER, ('stack', 'extra'),
     ['run_process puma-compute-agent', 'run_process puma-scheduler',
      'run_process puma-api', 'wait_for_service']),
    (CONTROLLER, ('unstack',), ['stop_process'] * 3),
    # A compute-only node: the driver, Nova's options and the agent
    # (run_process starts only the enabled ones).
    (COMPUTE, ('stack', 'install'), ['setup_develop compute']),
    (COMPUTE, ('stack', 'post-config'),
     ['iniset nova.conf', 'iniset nova.conf']),
    (COMPUTE, ('stack', 'extra'), ['run_process puma-compute-agent']),
    # A node with none of the three: the plugin does nothing.
    (OTHER, ('stack', 'install'), []),
    (OTHER, ('stack', 'post-config'), []),
    (OTHER, ('stack', 'extra'), []),
])
def test_phase_calls(tmp_path, services, phase, want):
    assert run_phase(tmp_path, services, *phase) == want


def test_controller_post_config(tmp_path):
    calls = run_phase(tmp_path, CONTROLLER, 'stack', 'post-config')
    # Nova's options, puma.conf, the keystone accounts, then the schema.
    assert calls[:2] == ['iniset nova.conf'] * 2, calls
    assert 'iniset puma.conf' in calls, calls
    assert calls[-5:] == ['create_service_user', 'get_or_create_service',
                          'get_or_create_endpoint', 'recreate_database',
                          'puma-manage'], calls


def test_compute_agent_runs_on_nova_compute_s_configuration(tmp_path):
    calls = run_phase(tmp_path, COMPUTE, 'stack', 'extra')
    log = (tmp_path / 'calls').read_text().splitlines()
    agent = [line for line in log
             if line.startswith('run_process puma-compute-agent ')]
    assert len(agent) == 1, calls
    assert agent[0].endswith('/puma-compute-agent --config-file %s'
                             % (tmp_path / 'nova.conf')), agent


def test_api_only_node_does_not_recreate_the_database(tmp_path):
    calls = run_phase(tmp_path, 'keystone n-api puma-api', 'stack',
                      'post-config')
    assert 'iniset puma.conf' in calls, calls
    assert 'recreate_database' not in calls and 'puma-manage' not in calls
    assert 'iniset nova.conf' not in calls, calls
