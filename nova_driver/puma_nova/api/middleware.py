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
"""WSGI middleware of puma-api: JSON faults and the request context."""

from oslo_config import cfg
from oslo_log import log as logging
from oslo_serialization import jsonutils
import webob
import webob.dec

from puma_nova import context
from puma_nova import exception
from puma_nova import policy

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def fault(code, message):
    """A JSON error response: {"error": {"code", "title", "message"}}."""
    resp = webob.Response(status=code, content_type='application/json')
    resp.text = jsonutils.dumps({'error': {
        'code': code, 'title': resp.status.split(' ', 1)[1],
        'message': message}})
    return resp


class FaultWrapper(object):
    """Turns PumaException into its HTTP code; anything else into 500."""

    def __init__(self, app):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            return req.get_response(self.app)
        except exception.PumaException as e:
            if e.code >= 500:
                LOG.error('%s %s: %s', req.method, req.path, e)
            return fault(e.code, str(e))
        except Exception:
            LOG.exception('%s %s failed', req.method, req.path)
            return fault(500, 'internal error; see the puma-api log')


class ContextMiddleware(object):
    """Builds puma.context from the auth_token headers.

    Authorization is left to the policy of each action
    (puma_nova.policies, enforced in v1.Controller); the context's
    is_admin is what the context_is_admin rule says.  With auth_strategy
    'noauth' every request is an admin request.
    """

    def __init__(self, app):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req):
        if CONF.puma_api.auth_strategy == 'noauth':
            ctxt = context.RequestContext(
                is_admin=True, overwrite=False, roles=['admin'],
                request_id=req.environ.get('openstack.request_id'))
        else:
            if req.headers.get('X-Identity-Status', 'Invalid') != \
                    'Confirmed':
                return fault(401, 'authentication required')
            ctxt = context.RequestContext.from_environ(req.environ,
                                                       overwrite=False)
            ctxt.is_admin = policy.check_is_admin(ctxt)
        req.environ['puma.context'] = ctxt
        return req.get_response(self.app)
