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
        name='puma:ledger:list:project',
        check_str=base.RULE_NOBODY,
        scope_types=base.PROJECT_SCOPE,
        description='List the ledger entries of the caller\'s own '
                    'project: what GET /v1/ledger answers a caller that '
                    'puma:ledger:list refuses.  The target is the '
                    'caller\'s project.  Nobody by default (an '
                    'administrator sees every project through '
                    'puma:ledger:list); e.g. '
                    '"rule:project_reader_or_admin" shows a project\'s '
                    'readers their entries, main and sub host names '
                    'included.',
        operations=[{'method': 'GET', 'path': '/v1/ledger'}]),
    policy.DocumentedRuleDefault(
        name='puma:ledger:release',
        check_str=base.ADMIN_API,
        scope_types=base.PROJECT_SCOPE,
        description='Release a planned or failed ledger entry (gives '
                    'back its memory on the main and sub hosts).  The '
                    'target is the entry\'s project (its server\'s); '
                    'a caller that is not an administrator gets 404 for '
                    'an entry of another project.',
        operations=[{'method': 'POST',
                     'path': '/v1/ledger/{entry_id}/release'}]),
]


def list_rules():
    return rules
