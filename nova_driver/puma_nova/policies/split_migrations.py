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
"""Policy of POST /v1/split-migrations."""

from oslo_policy import policy

from puma_nova.policies import base

rules = [
    policy.DocumentedRuleDefault(
        name='puma:split_migration:create',
        check_str=base.ADMIN_API,
        scope_types=base.PROJECT_SCOPE,
        description='Plan a split migration of a server and ask Nova '
                    'to live-migrate it to its main host.  The target is '
                    'the server\'s project: e.g. '
                    '"rule:project_member_or_admin" lets members '
                    'split-migrate their own project\'s servers.  A '
                    'caller that is not an administrator gets 404 for a '
                    'server of another project, as from Nova.',
        operations=[{'method': 'POST', 'path': '/v1/split-migrations'}]),
]


def list_rules():
    return rules
