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
"""Native threads for the Puma services: eventlet is never loaded.

oslo.messaging and oslo.service use eventlet whenever it can be imported
(it is still installed as a dependency).  Our services and their tests call
use_native_threads() before importing them: eventlet becomes unimportable
and oslo.service selects its 'threading' backend.  Inside nova-compute,
Nova's own monkey_patch module does the same.
"""

import sys

from oslo_service import backend


class _NoEventlet:
    """Meta path finder refusing eventlet, as Nova's own poison does.

    A finder rather than ``sys.modules['eventlet'] = None``: Nova checks
    that 'eventlet' is absent from sys.modules before it takes its own
    native-threading decision.
    """

    def find_spec(self, fullname, path, target=None):
        if fullname == 'eventlet' or fullname.startswith('eventlet.'):
            raise ImportError('Puma runs with native threads: eventlet '
                              'must not be imported')
        return None


def use_native_threads():
    if 'eventlet' not in sys.modules and not any(
            isinstance(f, _NoEventlet) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoEventlet())
    if backend.get_backend_type() is None:
        backend.init_backend(backend.BackendType.THREADING)
