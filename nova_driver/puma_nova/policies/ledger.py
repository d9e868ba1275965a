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
"""Policy of the split-migration ledger."""

from oslo_policy import policy

from puma_nova.policies import base

rules = [
    policy.DocumentedRuleDefault(
        name='puma:ledger:list',
        check_str=base.ADMIN_API,
        scope_types=base.PROJECT_SCOPE,
        description='List the split-migration ledger of every project.',
        operations=[{'method': 'GET', 'path': '/v1/ledger'}]),
    policy.DocumentedRuleDefault(
        name='puma:ledger:release',
        check_str=base.ADMIN_API,
        scope_types=base.PROJECT_SCOPE,
        description='Release a planned or failed ledger entry (gives '
                    'back its memory on the main and sub hosts).',
        operations=[{'method': 'POST',
                     'path': '/v1/ledger/{entry_id}/release'}]),
]


def list_rules():
    return rules
