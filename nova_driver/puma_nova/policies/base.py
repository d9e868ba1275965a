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
"""Base rules the puma-api rules are built from.

Puma follows Nova and Placement (the community's "consistent and secure
default RBAC" goal as revised in 2023): the cloud administrator is a
project-scoped token with the admin role; system scope is left to
keystone.  The defaults ask for admin: the lists show every host and
project, and no default gives a project's persona anything.

The target of a rule that acts on one resource is that resource's
project, as in Nova (a split migration: the server's; a ledger entry
release: the entry's); the target of a rule on the whole cloud is the
caller's own project.  The project personas below (Nova's names and
check strings) are used by no default: an operator builds rules such as
"members may split-migrate their own servers" from them
("puma:split_migration:create": "rule:project_member_or_admin").
"""

from oslo_policy import policy

ADMIN = 'rule:context_is_admin'
ADMIN_API = 'rule:admin_api'
READER_API = 'rule:reader_api'
RULE_NOBODY = '!'
PROJECT_SCOPE = ['project']

rules = [
    policy.RuleDefault(
        'context_is_admin', 'role:admin',
        description='Who is an administrator of the whole cloud: decides '
                    'what the is_admin:True check and the request '
                    'context\'s is_admin mean.'),
    policy.RuleDefault(
        'admin_api', ADMIN,
        description='Default rule of the puma-api operations: they act '
                    'on every host and project.'),
    policy.RuleDefault(
        'reader_api', 'role:reader',
        description='A reader of the whole cloud.  No default uses it; '
                    'a policy file can give the read-only operations to '
                    'it, e.g. "puma:ledger:list": "rule:admin_api or '
                    'rule:reader_api".'),
    policy.RuleDefault(
        'project_manager_api', 'role:manager and project_id:%(project_id)s',
        description='A manager of the target\'s project.  Used by no '
                    'default; meant for the rules whose target is a '
                    'resource\'s project (puma:split_migration:create, '
                    'puma:ledger:release, puma:ledger:list:project), not '
                    'for the whole-cloud ones (the lists of hosts, pairs, '
                    'memory servers and the whole ledger), where the '
                    'target is the caller\'s own project and it would '
                    'mean a manager of any project.'),
    policy.RuleDefault(
        'project_member_api', 'role:member and project_id:%(project_id)s',
        description='A member of the target\'s project.  Used by no '
                    'default; see project_manager_api.'),
    policy.RuleDefault(
        'project_reader_api', 'role:reader and project_id:%(project_id)s',
        description='A reader of the target\'s project.  Used by no '
                    'default; see project_manager_api.'),
    policy.RuleDefault(
        'project_manager_or_admin',
        'rule:project_manager_api or rule:context_is_admin',
        description='A manager of the target\'s project, or an '
                    'administrator.'),
    policy.RuleDefault(
        'project_member_or_admin',
        'rule:project_member_api or rule:context_is_admin',
        description='A member of the target\'s project, or an '
                    'administrator.'),
    policy.RuleDefault(
        'project_reader_or_admin',
        'rule:project_reader_api or rule:context_is_admin',
        description='A reader of the target\'s project, or an '
                    'administrator.'),
]


def list_rules():
    return rules
