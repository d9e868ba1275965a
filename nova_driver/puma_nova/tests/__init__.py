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
"""Tests of the Puma Nova integration.

Nova picks its threading mode once, on first use, and refuses to run in
native-threading mode if anything imported (or blocked) eventlet before.
Test discovery imports the scheduler's tests, which block eventlet
themselves (puma_nova.threads), and Nova's test fixtures in one process,
so Nova's decision is taken here, before any test module is imported.
"""

try:
    from nova import monkey_patch
except ImportError:  # the Horizon env has no Nova
    monkey_patch = None

if monkey_patch is not None:
    monkey_patch.patch()
