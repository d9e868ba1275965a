# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Each node installs only its role's requirements: every import is there.

requirements.txt holds what all roles share and setup.cfg's [extras] one
extra per role.  Every module of puma_nova belongs to one role (by its
path, ROLES) and may import only the distributions of requirements.txt
and its role's extra, and only the puma_nova modules of the shared part
and of its own role.  The dashboard runs inside Horizon, which provides
what it imports; the tests have test-requirements.txt.
"""

import ast
import configparser
import os
import re
import sys

import testtools

import puma_nova

TOP = os.path.dirname(os.path.dirname(os.path.abspath(puma_nova.__file__)))

# Path prefixes (relative to puma_nova/) and their role; the rest is
# shared.  Longest prefix wins.
ROLES = {
    'virt/': 'compute',
    'cmd/compute.py': 'compute',
    'cmd/compute_agent.py': 'compute',
    'compute/agent.py': 'compute',
    'cmd/exporter.py': 'compute',
    'exporter/': 'compute',
    'conf/exporter.py': 'compute',
    'api/': 'controller',
    'wsgi/': 'controller',
    'scheduler/': 'controller',
    # Both sides: computes report to the scheduler through its RPC API,
    # with a host report the scheduler's schemas validate.
    'scheduler/rpcapi.py': 'shared',
    'scheduler/schemas.py': 'shared',
    'compute/stats.py': 'compute',
    'db/': 'controller',
    'policies/': 'controller',
    'policy.py': 'controller',
    'conf/scheduler.py': 'controller',
    'cmd/api.py': 'controller',
    'cmd/scheduler.py': 'controller',
    'cmd/manage.py': 'controller',
    'osc/': 'client',
    'watcher/': 'watcher',
    'dashboard/': None,
    'tests/': None,
}

# Top-level import name -> distribution.  None: provided by the system
# with the service it extends (libvirt-python comes with libvirt, as for
# Nova's own libvirt driver).
DISTRIBUTIONS = {
    'alembic': 'alembic',
    'jsonschema': 'jsonschema',
    'keystoneauth1': 'keystoneauth1',
    'keystonemiddleware': 'keystonemiddleware',
    'libvirt': None,
    'libvirt_qemu': None,
    'lxml': 'lxml',
    'nova': 'nova',
    'openstack': 'openstacksdk',
    'os_resource_classes': 'os-resource-classes',
    'osc_lib': 'osc-lib',
    'prometheus_client': 'prometheus-client',
    'oslo_concurrency': 'oslo.concurrency',
    'oslo_config': 'oslo.config',
    'oslo_context': 'oslo.context',
    'oslo_db': 'oslo.db',
    'oslo_log': 'oslo.log',
    'oslo_messaging': 'oslo.messaging',
    'oslo_middleware': 'oslo.middleware',
    'oslo_policy': 'oslo.policy',
    'oslo_serialization': 'oslo.serialization',
    'oslo_service': 'oslo.service',
    'oslo_utils': 'oslo.utils',
    'oslo_versionedobjects': 'oslo.versionedobjects',
    'paste': 'PasteDeploy',
    'pbr': 'pbr',
    'routes': 'Routes',
    'sqlalchemy': 'SQLAlchemy',
    'watcher': 'python-watcher',
    'webob': 'WebOb',
}


def norm(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def requirement_names(lines):
    names = set()
    for line in lines:
        line = line.split('#')[0].strip()
        if line:
            names.add(norm(re.match(r'[A-Za-z0-9_.-]+', line).group(0)))
    return names


def role_of(rel):
    best = ''
    for prefix in ROLES:
        if rel.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return ROLES[best] if best else 'shared'


def imports(path):
    """(top-level name, full name) of every absolute import in PATH."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split('.')[0], alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and \
                not node.level:
            yield node.module.split('.')[0], node.module
            for alias in node.names:
                yield (node.module.split('.')[0],
                       node.module + '.' + alias.name)


def modules():
    base = os.path.join(TOP, 'puma_nova')
    for root, _, files in os.walk(base):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(root, name)
                yield os.path.relpath(path, base).replace(os.sep, '/'), path


def module_role(full):
    """The role of puma_nova module FULL (dotted), or None if not ours."""
    rel = full.split('.', 1)[1].replace('.', '/') if '.' in full else ''
    base = os.path.join(TOP, 'puma_nova')
    if os.path.exists(os.path.join(base, rel + '.py')):
        return role_of(rel + '.py')
    init = os.path.join(base, rel, '__init__.py')
    if os.path.exists(init):
        # A package: what its __init__ runs, if anything.
        with open(init) as f:
            code = [n for n in ast.parse(f.read()).body
                    if not (isinstance(n, ast.Expr) and
                            isinstance(n.value, ast.Constant))]
        return role_of(rel + '/__init__.py') if code else None
    return None


class TestRequirements(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if not os.path.exists(os.path.join(TOP, 'setup.cfg')):
            self.skipTest('no source tree')
        with open(os.path.join(TOP, 'requirements.txt')) as f:
            self.shared = requirement_names(f)
        cfg = configparser.ConfigParser()
        cfg.read(os.path.join(TOP, 'setup.cfg'))
        self.extras = {role: requirement_names(value.splitlines())
                       for role, value in cfg['extras'].items()}

    def test_one_extra_per_role(self):
        self.assertEqual({'compute', 'controller', 'client', 'watcher'},
                         set(self.extras))

    def test_every_import_is_a_requirement_of_its_role(self):
        problems = []
        stdlib = set(sys.stdlib_module_names)
        for rel, path in modules():
            role = role_of(rel)
            if role is None:
                continue
            allowed = self.shared | self.extras.get(role, set())
            for top, full in set(imports(path)):
                if top in stdlib or top == '__future__':
                    continue
                if top == 'puma_nova':
                    other = module_role(full)
                    if other not in (None, 'shared', role):
                        problems.append('%s (%s) imports %s (%s)'
                                        % (rel, role, full, other))
                    continue
                if top not in DISTRIBUTIONS:
                    problems.append('%s imports %s: which distribution? '
                                    '(add it to DISTRIBUTIONS)' % (rel, top))
                    continue
                dist = DISTRIBUTIONS[top]
                if dist is not None and norm(dist) not in allowed:
                    problems.append('%s (%s) imports %s, not in '
                                    'requirements.txt nor extra %s'
                                    % (rel, role, top, role))
        self.assertEqual([], sorted(set(problems)))

    def test_nova_only_for_computes(self):
        self.assertIn('nova', self.extras['compute'])
        self.assertNotIn('nova', self.shared)
        self.assertNotIn('nova', self.extras['controller'])
        self.assertNotIn('nova', self.extras['client'])
