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
"""The puma-api WSGI application.

Pipeline, outermost first:

    FaultWrapper -> [keystonemiddleware auth_token] -> ContextMiddleware
        -> APIRouter (routes) -> v1.Controller

Each v1.Controller action is authorized by its oslo.policy rule
(puma_nova.policies) with the request context's credentials; the
target is the caller's project for a whole-cloud action, the resource's
project for an action on one resource (puma_nova.policy).

auth_token is left out only with [puma_api] auth_strategy = noauth.
"""

import sys

from keystonemiddleware import auth_token
from oslo_config import cfg
from oslo_log import log as logging
from oslo_middleware import cors
from oslo_middleware import healthcheck
from oslo_middleware import http_proxy_to_wsgi
from oslo_middleware import request_id
from oslo_serialization import jsonutils
import routes
import webob
import webob.dec

from puma_nova.api import microversion
from puma_nova.api import middleware
from puma_nova.api import nova
from puma_nova.api import v1
from puma_nova.conf import scheduler as sched_conf
from puma_nova import exception
from puma_nova import policy
from puma_nova import rpc
from puma_nova.scheduler import rpcapi

CONF = cfg.CONF

# (path, method, controller action, has a JSON body)
ROUTES = (
    ('/v1/hosts', 'GET', 'hosts', False),
    ('/v1/pairs', 'GET', 'pairs', False),
    ('/v1/memory-servers', 'GET', 'memory_servers', False),
    ('/v1/ledger', 'GET', 'ledger', False),
    ('/v1/ledger/{entry_id}/release', 'POST', 'release_entry', False),
    ('/v1/split-migrations', 'POST', 'split_migrate', True),
)
MAX_BODY = 64 * 1024

VERSIONS = {'versions': [{
    'id': 'v1', 'status': 'CURRENT',
    'min_version': microversion.text(microversion.MIN_VERSION),
    'version': microversion.text(microversion.MAX_VERSION),
    'links': [{'rel': 'self', 'href': '/v1'}]}]}


def _json(code, doc):
    resp = webob.Response(status=code, content_type='application/json')
    resp.text = jsonutils.dumps(doc)
    return resp


class APIRouter(object):

    def __init__(self, controller):
        self.controller = controller
        self.mapper = routes.Mapper()
        self.paths = routes.Mapper()
        self.with_body = {a for _p, _m, a, body in ROUTES if body}
        for path, method, action, _body in ROUTES:
            self.mapper.connect(path, action=action,
                                conditions={'method': [method]},
                                requirements={'entry_id': '[0-9]+'})
            self.paths.connect(path, action=action,
                               requirements={'entry_id': '[0-9]+'})

    def _body(self, req):
        if req.content_length and req.content_length > MAX_BODY:
            raise exception.TooLarge('request body larger than %d bytes' %
                                     MAX_BODY)
        if req.content_type != 'application/json':
            raise exception.Invalid('request body must be application/json')
        try:
            return jsonutils.loads(req.body)
        except ValueError as e:
            raise exception.Invalid('request body is not JSON: %s' % e)

    @webob.dec.wsgify
    def __call__(self, req):
        version = microversion.requested(req.headers)
        req.environ['puma.api_version'] = version
        resp = self._dispatch(req)
        resp.headers[microversion.HEADER] = '%s %s' % (
            microversion.SERVICE_TYPE, microversion.text(version))
        resp.headers.add('Vary', microversion.HEADER)
        return resp

    def _dispatch(self, req):
        path = req.path_info.rstrip('/') or '/'
        if path in ('/', '/v1') and req.method == 'GET':
            return _json(200, VERSIONS)
        match = self.mapper.match(path, req.environ)
        if match is None:
            if self.paths.match(path) is not None:
                return middleware.fault(405, '%s is not allowed on %s' %
                                        (req.method, path))
            return middleware.fault(404, 'no resource %s' % path)
        ctxt = req.environ['puma.context']
        method = getattr(self.controller, match['action'])
        args = {k: v for k, v in match.items() if k != 'action'}
        if match['action'] in self.with_body:
            if method.policy_target == 'caller':
                # A whole-cloud action's policy (policy.authorized)
                # before the body is read: a refused caller learns
                # nothing from validation.  An action on a resource
                # named in its body checks its rule once it has looked
                # the resource up (policy.checked_in_action), as Nova's
                # do.
                policy.authorize(ctxt, method.policy_rule)
            code, doc = method(req, ctxt, CONF, self._body(req), **args)
        else:
            code, doc = method(req, ctxt, CONF, **args)
        return _json(code, doc)


def _with_healthcheck(app, conf):
    """APP, with oslo.middleware's healthcheck answering /healthcheck."""
    health = healthcheck.Healthcheck(app, conf)

    @webob.dec.wsgify
    def dispatch(req):
        if req.path_info.rstrip('/') == '/healthcheck':
            return req.get_response(health)
        return req.get_response(app)
    return dispatch


def build_app(scheduler_api=None, nova_client=None, conf=CONF):
    """The WSGI app with its middleware (real clients by default)."""
    controller = v1.Controller(scheduler_api or rpcapi.SchedulerAPI(),
                               nova_client or nova.SDKNovaClient())
    app = middleware.ContextMiddleware(APIRouter(controller))
    if conf.puma_api.auth_strategy == 'keystone':
        app = auth_token.AuthProtocol(app, {'oslo_config_config': conf})
    app = middleware.FaultWrapper(app)
    # oslo.middleware, outside authentication as in Nova's pipeline:
    # GET /healthcheck for load balancers ([healthcheck] options), a
    # request id on every answer (x-openstack-request-id, faults
    # included), CORS for browsers ([cors]), and the client's scheme and
    # host behind a TLS proxy ([oslo_middleware]
    # enable_proxy_headers_parsing).
    app = _with_healthcheck(app, conf)
    app = request_id.RequestId(app, conf)
    app = cors.CORS(app, conf)
    return http_proxy_to_wsgi.HTTPProxyToWSGI(app, conf)


def init_application(argv=None):
    """WSGI entry point (puma-api-wsgi, uwsgi, mod_wsgi)."""
    sched_conf.register_opts(CONF)
    logging.register_options(CONF)
    rpc.set_defaults()
    CONF(sys.argv[1:] if argv is None else argv, project='puma',
         prog='puma-api')
    logging.setup(CONF, 'puma-api')
    return build_app()
