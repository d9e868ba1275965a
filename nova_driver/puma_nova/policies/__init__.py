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
"""puma-api policy in code (oslo.policy), one module per resource.

``list_rules`` is the ``oslo.policy.policies`` entry point (setup.cfg)
that oslopolicy-sample-generator and the enforcer read.
"""

import itertools

from puma_nova.policies import base
from puma_nova.policies import hosts
from puma_nova.policies import ledger
from puma_nova.policies import memory_servers
from puma_nova.policies import pairs
from puma_nova.policies import split_migrations


def list_rules():
    return itertools.chain(
        base.list_rules(),
        hosts.list_rules(),
        pairs.list_rules(),
        memory_servers.list_rules(),
        ledger.list_rules(),
        split_migrations.list_rules(),
    )
