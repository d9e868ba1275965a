# SPDX-License-Identifier: Apache-2.0
"""Horizon with Puma's panel in the lab cloud, and a browser against it.

Horizon (the Horizon environment of ``lab/setup cloud``) runs under uWSGI
on the control host like the other web services, with a settings module
of the run directory that points it at the cloud's Keystone.  Puma's
panel comes from the checkout: ``install_puma_dashboard`` of
devstack/lib/puma links its enabled files into Horizon's
``openstack_dashboard/local/enabled`` (as devstack does) and the
checkout's puma_nova is on Horizon's PYTHONPATH; ``cleanup_puma`` takes
the links away again when the cloud goes down.

:func:`browse` runs Debian's Chromium (headless) under Selenium in the
control namespace (puma_lab.horizon_browser): it logs in, opens the
panel and its tabs, keeps screenshots, and returns what the tables
showed and what the browser's console logged.
"""

import glob
import json
import os
import secrets
import shutil
import subprocess

from puma_lab import errors
from puma_lab import paths

PORT = 8080
CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'
SETTINGS_MODULE = 'lab_horizon_settings'
# Horizon's own openstack_dashboard.wsgi sets DJANGO_SETTINGS_MODULE to
# its settings whatever the environment says: this one keeps ours.
WSGI_MODULE = 'lab_horizon_wsgi'
WSGI = '''\
# Written by puma_lab.horizon: Horizon's WSGI application, with the
# settings module that DJANGO_SETTINGS_MODULE names.
from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
'''
PANEL_URL = '/admin/memory_pool/'
LINKS = ('_90100_puma_panel_group.py', '_90101_puma_memory_pool_panel.py')

SETTINGS = '''\
# Written by puma_lab.horizon for the lab cloud in {rundir}.
from openstack_dashboard.settings import *  # noqa: F401,F403

DEBUG = False
ALLOWED_HOSTS = ['*']
SECRET_KEY = {secret!r}
OPENSTACK_HOST = {addr!r}
OPENSTACK_KEYSTONE_URL = 'http://{addr}:5000/v3'
OPENSTACK_KEYSTONE_DEFAULT_ROLE = 'member'
OPENSTACK_ENDPOINT_TYPE = 'publicURL'
# Static files collected into the run directory, served by uWSGI;
# compressed on first use (no offline manifest to keep in step).
STATIC_ROOT = {static!r}
COMPRESS_ROOT = {static!r}
COMPRESS_OFFLINE = False
SESSION_ENGINE = 'django.contrib.sessions.backends.signed_cookies'
CACHES = {{'default': {{
    'BACKEND': 'django.core.cache.backends.locmem.LocMemCache'}}}}
'''


def venv(*parts):
    return os.path.join(paths.CACHE, 'horizon', 'current', 'venv', *parts)


def missing(browser=True):
    """Why Horizon (and with BROWSER Chromium) cannot run here, or None."""
    if not os.path.exists(os.path.join(paths.CACHE, 'horizon', 'current',
                                       'good')):
        return ('no Horizon environment in %s (run lab/setup cloud)'
                % os.path.join(paths.CACHE, 'horizon'))
    for binary in (CHROMIUM, CHROMEDRIVER) if browser else ():
        if not os.access(binary, os.X_OK):
            return '%s is missing (run lab/setup deps)' % binary
    return None


def site_packages():
    """The Horizon environment's site-packages.

    It holds openstack_dashboard/: devstack's HORIZON_DIR.
    """
    found = glob.glob(venv('lib', 'python3*', 'site-packages',
                           'openstack_dashboard'))
    if not found:
        raise errors.LabError('no openstack_dashboard in %s' % venv())
    return os.path.dirname(found[0])


def devstack(function, cloud):
    """Run FUNCTION of devstack/lib/puma with the lab's HORIZON_DIR.

    Only what install_puma_dashboard and cleanup_puma touch is set:
    Horizon's directory; the configuration and Nova directories point
    into the run directory, and sudo runs the command (we are root).
    """
    script = ('sudo() { "$@"; }; . %s; %s' % (
        os.path.join(paths.TOP, 'devstack', 'lib', 'puma'), function))
    env = dict(os.environ, HORIZON_DIR=site_packages(),
               PUMA_DIR=paths.TOP, PUMA_BIN_DIR=cloud.path('horizon', 'bin'),
               PUMA_CONF_DIR=cloud.path('horizon', 'etc-puma'),
               NOVA_DIR=cloud.path('horizon', 'no-nova'))
    p = subprocess.run(['bash', '-c', script], env=env, text=True,
                       capture_output=True)
    if p.returncode != 0:
        raise errors.LabError('devstack/lib/puma %s failed: %s'
                              % (function, p.stderr or p.stdout))


def start(cloud):
    """Horizon on the control host at http://ADDR:PORT/ (idempotent)."""
    from puma_lab import cloud as cloud_mod
    if cloud.pid('horizon') is not None:
        return url(cloud)
    why = missing()
    if why:
        raise errors.LabError(why)
    cloud.step('Horizon with the Puma panel')
    d = cloud.path('horizon')
    static = os.path.join(d, 'static')
    os.makedirs(static, exist_ok=True)
    with open(os.path.join(d, SETTINGS_MODULE + '.py'), 'w') as f:
        f.write(SETTINGS.format(rundir=cloud.path(), addr=cloud.addr,
                                secret=secrets.token_hex(32),
                                static=static))
    with open(os.path.join(d, WSGI_MODULE + '.py'), 'w') as f:
        f.write(WSGI)
    devstack('install_puma_dashboard', cloud)
    cloud.state['horizon'] = {'links': [
        os.path.join(site_packages(), 'openstack_dashboard', 'local',
                     'enabled', name) for name in LINKS]}
    cloud.save()
    pythonpath = '%s:%s' % (d, cloud.state['puma_site'])
    env = {'DJANGO_SETTINGS_MODULE': SETTINGS_MODULE,
           'PYTHONPATH': pythonpath}
    cloud.run([venv('bin', 'django-admin'), 'collectstatic', '--noinput',
               '-v', '0'], env=env, timeout=600)
    ini = os.path.join(d, 'uwsgi.ini')
    # The cloud's uWSGI settings, with Horizon's environment as home, its
    # static files, and the checkout's puma_nova as a second Python path
    # ("pp" is uWSGI's alias of "pythonpath": an ini key appears once).
    sections = cloud_mod.uwsgi_ini(
        'horizon', cloud.addr, PORT, WSGI_MODULE + ':application',
        'DJANGO_SETTINGS_MODULE', SETTINGS_MODULE,
        cloud.path('log', 'horizon.log'), os.path.join(d, 'uwsgi.pid'),
        pythonpath=d)
    sections['uwsgi'].update({'home': venv(),
                              'static-map': '/static=%s' % static,
                              'pp': cloud.state['puma_site']})
    cloud_mod.write_ini(ini, sections)
    cloud.spawn('horizon', [cloud_mod.venv('bin', 'uwsgi'), '--ini', ini])
    cloud.ops('wait-http', {'url': url(cloud, '/auth/login/'),
                            'timeout': cloud_mod.HTTP_TIMEOUT},
              timeout=cloud_mod.HTTP_TIMEOUT + 30)
    return url(cloud)


def stop(cloud):
    """Stop Horizon and take the panel's links out of its environment."""
    if 'horizon' not in cloud.state:
        return
    if cloud.pid('horizon') is not None:
        cloud.stop('horizon')
    devstack('cleanup_puma', cloud)


def url(cloud, suffix=''):
    return 'http://%s:%d%s' % (cloud.addr, PORT, suffix)


def browse(cloud, shots, user='admin', password=None, timeout=300,
           press=None):
    """Log in to Horizon as USER and read Puma's panel in Chromium.

    Screenshots go to the folder SHOTS (emptied first).  PRESS, a dict of
    table, row (object id) and action, presses that row action after the
    tables were read.  Returns the browser script's result
    (puma_lab.horizon_browser.main).
    """
    from puma_lab import cloud as cloud_mod
    shutil.rmtree(shots, ignore_errors=True)
    os.makedirs(shots)
    arg = {'url': url(cloud), 'panel': PANEL_URL, 'user': user,
           'password': password or cloud_mod.PASSWORD, 'shots': shots,
           'chromium': CHROMIUM, 'chromedriver': CHROMEDRIVER,
           'home': cloud.path('horizon', 'browser-home'), 'press': press}
    out = cloud.run([venv('bin', 'python'), '-m', 'puma_lab.horizon_browser',
                     json.dumps(arg)],
                    env={'PYTHONPATH': os.path.join(paths.TOP, 'lab')},
                    timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])
