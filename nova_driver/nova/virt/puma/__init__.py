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

"""Shim that lets Nova load the Puma driver.

Nova prefixes ``[DEFAULT] compute_driver`` with ``nova.virt.``, so
``compute_driver = puma.PumaLibvirtDriver`` imports this package. It is
installed into Nova's ``nova/virt/`` by ``pip install puma-nova``; with
an editable install use the ``puma-nova-compute`` command instead (see
docs/nova.md).
"""

from puma_nova.virt.driver import PumaLibvirtDriver  # noqa: F401
