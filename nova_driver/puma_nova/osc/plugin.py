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
"""OpenStackClient plugin entry point (openstack.cli.extension = puma)."""

from osc_lib import utils

DEFAULT_API_VERSION = '1'
API_VERSION_OPTION = 'os_puma_api_version'
API_NAME = 'puma'
API_VERSIONS = {'1': 'puma_nova.osc.client.Client'}
SERVICE_TYPE = 'memory-pool'


def make_client(instance):
    """The Puma API client of an OSC ClientManager."""
    client_class = utils.get_client_class(
        API_NAME, instance._api_version[API_NAME], API_VERSIONS)
    return client_class(
        session=instance.session,
        service_type=SERVICE_TYPE,
        interface=instance.interface,
        region_name=instance.region_name,
        endpoint_override=getattr(instance._cli_options, 'puma_endpoint',
                                  None))


def build_option_parser(parser):
    """Global options of the plugin."""
    parser.add_argument(
        '--os-puma-api-version', metavar='<puma-api-version>',
        default=utils.env('OS_PUMA_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='Puma API version, default=%s (Env: OS_PUMA_API_VERSION)' %
             DEFAULT_API_VERSION)
    parser.add_argument(
        '--os-puma-endpoint', metavar='<url>', dest='puma_endpoint',
        default=utils.env('OS_PUMA_ENDPOINT'),
        help='puma-api URL instead of the catalog entry '
             '(Env: OS_PUMA_ENDPOINT)')
    return parser
