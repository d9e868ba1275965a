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
keystone.  Every puma-api operation acts on the whole cloud (all hosts,
every project's ledger, live migrations), so the defaults ask for admin.
An operator can open the read-only ones to a reader persona with a
policy file (see docs/nova-scheduler.md).
"""

from oslo_policy import policy

ADMIN = 'rule:context_is_admin'
ADMIN_API = 'rule:admin_api'
READER_API = 'rule:reader_api'
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
]


def list_rules():
    return rules
