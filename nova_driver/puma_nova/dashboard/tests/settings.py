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
"""Django settings of the plugin's tests: Horizon's, plus our panel."""

from openstack_dashboard import enabled as os_enabled
from openstack_dashboard.test.settings import *  # noqa: F401,F403
from openstack_dashboard.utils import settings as settings_utils

from puma_nova.dashboard import enabled

# Horizon's test settings already applied its own enabled files; apply
# them again with ours (update_dashboards rebuilds the panel config) and
# drop the applications that were added twice.
settings_utils.update_dashboards(
    [os_enabled, enabled], HORIZON_CONFIG, INSTALLED_APPS)  # noqa: F405
INSTALLED_APPS = list(dict.fromkeys(INSTALLED_APPS))  # noqa: F405
