# SPDX-License-Identifier: Apache-2.0
"""Tempest against the lab cloud: Puma's plugin (puma_tempest_plugin).

``lab/setup cloud`` installs tempest in $PUMA_CACHE/tempest/current/venv;
the plugin is the checkout's, found through its entry point in the
``--target`` install of nova_driver that the cloud makes for puma-api
(state ``puma_site``). :func:`run` makes a workspace in the cloud's run
directory, writes its tempest.conf for the cloud (dynamic credentials
from the admin account, only puma-api marked available) and runs the
tests that REGEX selects in the control namespace.
"""

import configparser
import os
import re

from puma_lab import errors
from puma_lab import paths

REGEX = r'^puma_tempest_plugin\.'


def venv(*parts):
    return os.path.join(paths.CACHE, 'tempest', 'current', 'venv', *parts)


def missing():
    if not os.path.exists(os.path.join(paths.CACHE, 'tempest', 'current',
                                       'good')):
        return ('no tempest environment in %s (run lab/setup cloud)'
                % os.path.join(paths.CACHE, 'tempest'))
    return None


def conf(cloud, password, region):
    """tempest.conf for CLOUD (a puma_lab.cloud.Cloud that is up)."""
    c = configparser.ConfigParser()
    c['DEFAULT'] = {'log_file': 'tempest.log', 'debug': 'true'}
    c['auth'] = {'use_dynamic_credentials': 'true',
                 'admin_username': 'admin', 'admin_password': password,
                 'admin_project_name': 'admin',
                 'admin_domain_name': 'Default',
                 'create_isolated_networks': 'false'}
    c['identity'] = {'uri_v3': cloud.url('keystone', '/v3'),
                     'auth_version': 'v3', 'region': region}
    c['identity-feature-enabled'] = {'api_v2': 'false'}
    # Only puma-api is under test here: the other services' own tempest
    # tests are theirs.
    c['service_available'] = {s: 'false' for s in (
        'nova', 'glance', 'neutron', 'cinder', 'swift', 'horizon')}
    c['service_available']['puma'] = 'true'
    c['memory_pool'] = {'catalog_type': 'memory-pool',
                        'endpoint_type': 'public'}
    return c


def run(cloud, password, region, regex=REGEX, timeout=900):
    """Run the selected tests; returns {'passed', 'failed', 'skipped', 'out'}.

    :raises LabError: when tempest fails or runs no test, with its output.
    """
    why = missing()
    if why:
        raise errors.LabError(why)
    ws = cloud.path('tempest')
    # tempest keeps state under $HOME/.tempest: the run directory's,
    # never the machine's.
    home = cloud.path('tempest-home')
    os.makedirs(home, exist_ok=True)
    env = {'PYTHONPATH': cloud.state['puma_site'], 'HOME': home}
    if not os.path.exists(os.path.join(ws, '.stestr.conf')):
        # The workspace registry in the run directory too: tempest's
        # default (~/.tempest/workspace.yaml) is the machine's, and it
        # refuses a second workspace of the same name.
        cloud.run([venv('bin', 'tempest'), 'init', '--workspace-path',
                   cloud.path('tempest-workspaces.yaml'), ws], env=env)
    with open(os.path.join(ws, 'etc', 'tempest.conf'), 'w') as f:
        conf(cloud, password, region).write(f)
    try:
        out = cloud.run(['sh', '-c', 'cd "$0" && exec "$1" run --serial '
                         '--regex "$2"', ws, venv('bin', 'tempest'), regex],
                        env=env, timeout=timeout)
    except errors.LabError as e:
        raise errors.LabError('tempest run failed (log: %s): %s'
                              % (os.path.join(ws, 'tempest.log'), e))
    counts = {}
    for key in ('Passed', 'Failed', 'Skipped'):
        m = re.search(r'^ - %s: (\d+)$' % key, out, re.M)
        counts[key.lower()] = int(m.group(1)) if m else 0
    if not counts['passed']:
        raise errors.LabError('tempest ran no test: %s' % out[-3000:])
    counts['out'] = out
    return counts
