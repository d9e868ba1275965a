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
"""The puma-api policy enforcer (oslo.policy), created once per process.

Rules and their defaults are in code (puma_nova.policies); an operator
overrides any of them in the file of [oslo_policy] policy_file
(policy.yaml next to puma.conf by default), which the enforcer reloads
when it changes.
"""

import functools
import threading

from oslo_config import cfg
from oslo_log import log as logging
from oslo_policy import policy

from puma_nova import exception
from puma_nova import policies

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

_ENFORCER = None
_LOCK = threading.Lock()


def get_enforcer():
    """The oslo.policy.enforcer entry point (oslopolicy-* commands).

    They parse CONF with their own --config-file; if nothing parsed it
    yet, read puma's usual files (/etc/puma/puma.conf), as Nova's
    get_enforcer does, so that the policy file is found.
    """
    try:
        CONF.find_file('policy.yaml')
    except cfg.NotInitializedError:
        CONF([], project='puma')
    return _enforcer()


def _enforcer():
    """The process's enforcer, created on first use."""
    global _ENFORCER
    if _ENFORCER is None:
        with _LOCK:
            if _ENFORCER is None:
                enforcer = policy.Enforcer(CONF)
                enforcer.register_defaults(policies.list_rules())
                _ENFORCER = enforcer
    return _ENFORCER


def reset():
    """Forget the enforcer (tests; a new policy_file is read anew)."""
    global _ENFORCER
    with _LOCK:
        if _ENFORCER is not None:
            _ENFORCER.clear()
        _ENFORCER = None


def _target(ctxt):
    """The target of a rule that acts on the whole cloud.

    The caller's own project and user: for such a rule, a check such as
    project_id:%(project_id)s means "any project-scoped token".
    """
    return {'project_id': ctxt.project_id, 'user_id': ctxt.user_id}


def resource_target(project_id):
    """The target of a rule that acts on a resource of PROJECT_ID.

    As Nova's context.can(rule, target={'project_id':
    instance.project_id}): project_id:%(project_id)s means "the
    resource's project is the caller's".
    """
    return {'project_id': project_id}


def authorize(ctxt, rule, target=None):
    """Raise Forbidden unless CTXT's credentials pass RULE on TARGET.

    TARGET: the resource's (resource_target()); None for an operation on the
    whole cloud (the caller's own project).
    """
    if target is None:
        target = _target(ctxt)
    try:
        _enforcer().authorize(rule, target, ctxt, do_raise=True)
    except policy.InvalidScope:
        LOG.debug('%s refused: token scope', rule)
        raise exception.Forbidden(
            'policy %s does not allow this token\'s scope' % rule)
    except policy.PolicyNotAuthorized:
        LOG.debug('%s refused for user %s project %s roles %s on %s',
                  rule, ctxt.user_id, ctxt.project_id, ctxt.roles, target)
        raise exception.Forbidden('policy does not allow %s' % rule)


def allowed(ctxt, rule, target=None):
    """Whether CTXT passes RULE on TARGET (authorize without raising)."""
    try:
        authorize(ctxt, rule, target)
    except exception.Forbidden:
        return False
    return True


def check_is_admin(ctxt):
    """Whether CTXT passes context_is_admin (sets ctxt.is_admin)."""
    return _enforcer().authorize('context_is_admin', _target(ctxt),
                                 ctxt, do_raise=False)


def may_see(ctxt, project_id):
    """Whether CTXT may see a resource of PROJECT_ID at all.

    Nova's rule (nova.context.is_user_context and the project_only
    database queries): an administrator sees every project's resources,
    any other caller only those of its own project.  A resource the
    caller may not see is answered as one that does not exist (404), so
    that its existence is not disclosed; one it may see is then checked
    against its rule (403).
    """
    return ctxt.is_admin or (ctxt.project_id is not None and
                             ctxt.project_id == project_id)


def authorized(rule):
    """Decorator of a v1.Controller action on the whole cloud.

    RULE is checked before anything else, with the caller's own project
    as target.
    """
    def wrap(func):
        @functools.wraps(func)
        def wrapped(self, req, ctxt, *args, **kwargs):
            authorize(ctxt, rule)
            return func(self, req, ctxt, *args, **kwargs)
        wrapped.policy_rule = rule
        wrapped.policy_target = 'caller'
        return wrapped
    return wrap


def checked_in_action(rule):
    """Decorator of a v1.Controller action that checks RULE itself.

    An action on one resource looks it up, then checks RULE with the
    resource's project as target (authorize(ctxt, RULE,
    resource_target(...))), as Nova's actions do; a list may fall back
    to its caller's own project.  This only names RULE.
    """
    def wrap(func):
        func.policy_rule = rule
        func.policy_target = 'action'
        return func
    return wrap
