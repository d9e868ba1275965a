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
    # The operations act on the whole cloud: the target is the caller's
    # own project, so an override such as project_id:%(project_id)s
    # means "any project-scoped token".
    return {'project_id': ctxt.project_id, 'user_id': ctxt.user_id}


def authorize(ctxt, rule, target=None):
    """Raise Forbidden unless CTXT's credentials pass RULE."""
    try:
        _enforcer().authorize(rule, target or _target(ctxt), ctxt,
                              do_raise=True)
    except policy.InvalidScope:
        LOG.debug('%s refused: token scope', rule)
        raise exception.Forbidden(
            'policy %s does not allow this token\'s scope' % rule)
    except policy.PolicyNotAuthorized:
        LOG.debug('%s refused for user %s project %s roles %s', rule,
                  ctxt.user_id, ctxt.project_id, ctxt.roles)
        raise exception.Forbidden('policy does not allow %s' % rule)


def check_is_admin(ctxt):
    """Whether CTXT passes context_is_admin (sets ctxt.is_admin)."""
    return _enforcer().authorize('context_is_admin', _target(ctxt),
                                 ctxt, do_raise=False)


def authorized(rule):
    """Decorator of a v1.Controller action: RULE before anything else."""
    def wrap(func):
        @functools.wraps(func)
        def wrapped(self, req, ctxt, *args, **kwargs):
            authorize(ctxt, rule)
            return func(self, req, ctxt, *args, **kwargs)
        wrapped.policy_rule = rule
        return wrapped
    return wrap
