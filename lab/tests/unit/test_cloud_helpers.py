# SPDX-License-Identifier: Apache-2.0
"""puma_lab.cloud: the pure helpers (config files, state lookup)."""

import configparser
import json

from puma_lab import cloud


def read(path):
    conf = configparser.ConfigParser(interpolation=None)
    conf.optionxform = str
    conf.read(path)
    return conf


def test_write_ini_keeps_case_and_spells_booleans(tmp_path):
    path = tmp_path / 'sub' / 'x.conf'
    cloud.write_ini(str(path), {'DEFAULT': {'my_ip': '10.77.0.11',
                                            'debug': False},
                                'keystone_authtoken': {'auth_type':
                                                       'password'},
                                'uwsgi': {'http-socket': '1.2.3.4:5',
                                          'master': True}})
    conf = read(path)
    assert conf.defaults() == {'my_ip': '10.77.0.11', 'debug': 'false'}
    assert conf.get('keystone_authtoken', 'auth_type') == 'password'
    assert conf.get('uwsgi', 'http-socket') == '1.2.3.4:5'
    assert conf.get('uwsgi', 'master') == 'true'


def test_uwsgi_ini_of_a_service():
    ini = cloud.uwsgi_ini('keystone', '10.77.0.11', 5000,
                          'keystone.wsgi.api:application',
                          'OS_KEYSTONE_CONFIG_DIR', '/run/x/keystone',
                          '/run/x/log/k.log', '/run/x/k.pid')['uwsgi']
    assert ini['http-socket'] == '10.77.0.11:5000'
    assert ini['module'] == 'keystone.wsgi.api:application'
    assert ini['env'] == 'OS_KEYSTONE_CONFIG_DIR=/run/x/keystone'
    assert ini['home'] == cloud.venv()
    assert ini['die-on-term'] and ini['need-app']
    assert 'http-chunked-input' not in ini


def test_glance_takes_chunked_uploads():
    ini = cloud.uwsgi_ini('glance', 'a', 1, 'm', 'E', 'd', 'l', 'p')['uwsgi']
    assert ini['http-chunked-input'] and ini['http-raw-body']


def test_find_and_status_of_a_cloud(tmp_path, monkeypatch):
    monkeypatch.setattr(cloud.paths, 'RUN', str(tmp_path))
    assert cloud.find() is None
    assert cloud.status() == ['no lab cloud is up (./lab/cloud up)']
    run = tmp_path / '3'
    (run / 'pids').mkdir(parents=True)
    (run / 'pids' / 'nova-conductor').write_text('999999999\n')
    (run / 'clouds.yaml').write_text('clouds:\n  lab-admin: {}\n')
    (run / 'cloud.json').write_text(json.dumps({
        'lab_ns': 'puma-3', 'control_ns': 'puma-3-ctl',
        'control_addr': '10.77.0.11', 'clouds_yaml':
            str(run / 'clouds.yaml'),
        'hosts': {'a': {'ns': 'puma-3-a', 'addr': '10.77.0.12',
                        'uri': 'qemu+tcp://10.77.0.12/system'}}}))
    assert cloud.find() == str(run)
    out = cloud.status()
    assert out[0] == 'lab cloud in %s, namespaces puma-3-*' % run
    assert any('nova-conductor' in line and 'NOT RUNNING' in line
               for line in out), out
    assert '  clouds:' in out and '    lab-admin: {}' in out


def test_catalog_is_complete_for_nova():
    types = {t for _n, t, _d, _p, _u in cloud.CATALOG}
    assert types == {'identity', 'placement', 'image', 'compute',
                     'network', 'memory-pool'}
    # Every API, puma-api included, is a uWSGI application.
    assert set(cloud.WSGI) == set(cloud.PORTS)


def test_tempest_conf_tests_puma_api_only(tmp_path):
    from puma_lab import tempest

    (tmp_path / 'cloud.json').write_text(json.dumps(
        {'control_addr': '10.77.0.10'}))
    c = cloud.Cloud.attach(str(tmp_path))
    assert c.path('tempest') == str(tmp_path / 'tempest')
    conf = tempest.conf(c, 'pw', 'RegionOne')
    assert conf['identity']['uri_v3'] == 'http://10.77.0.10:5000/v3'
    assert conf['auth']['admin_password'] == 'pw'
    assert conf['auth']['use_dynamic_credentials'] == 'true'
    assert conf['service_available']['puma'] == 'true'
    assert {k for k, v in conf['service_available'].items()
            if v == 'true' and k not in conf.defaults()} == {'puma'}
    assert conf['memory_pool']['catalog_type'] == \
        [t for name, t, *_ in cloud.CATALOG if name == 'puma'][0]


def test_uwsgi_ini_takes_a_pythonpath():
    ini = cloud.uwsgi_ini('puma', 'a', 1, 'puma_nova.wsgi.api:application',
                          'OS_PUMA_CONFIG_DIR', '/run/x/puma', 'l', 'p',
                          pythonpath='/run/x/puma/site')['uwsgi']
    assert ini['pythonpath'] == '/run/x/puma/site'
    assert ini['env'] == 'OS_PUMA_CONFIG_DIR=/run/x/puma'
    assert 'pythonpath' not in cloud.uwsgi_ini(
        'nova', 'a', 1, 'm', 'E', 'd', 'l', 'p')['uwsgi']


def test_model_meminfo_sets_free_and_drops_the_cache():
    real = ('MemTotal:       24000000 kB\nMemFree:        20000000 kB\n'
            'MemAvailable:   22000000 kB\nBuffers:          100000 kB\n'
            'Cached:          1000000 kB\nSwapCached:            0 kB\n')
    model = cloud.model_meminfo(real, 80)
    values = {line.split(':')[0]: line.split()[1]
              for line in model.splitlines()}
    assert values == {'MemTotal': '24000000', 'MemFree': '81920',
                      'MemAvailable': '81920', 'Buffers': '0',
                      'Cached': '0', 'SwapCached': '0'}
    # Nova's Host.get_memory_mb_used() parses it the same way.
    m = model.split()
    assert int(m[m.index('MemFree:') + 1]) // 1024 == 80


def test_alive_reaps_a_zombie_of_ours():
    # A stopped service started by this process stays a zombie until it
    # is reaped: Cloud.stop must not wait for it until SIGKILL.
    import subprocess
    import time
    p = subprocess.Popen(['true'])
    time.sleep(0.5)
    assert not cloud._alive(p.pid)
    q = subprocess.Popen(['sleep', '30'])
    try:
        assert cloud._alive(q.pid)
    finally:
        q.kill()
        q.wait()


def test_horizon_settings_point_at_the_cloud():
    import ast
    from puma_lab import horizon
    text = horizon.SETTINGS.format(rundir='/run/x', addr='10.77.0.11',
                                   secret='s' * 64, static='/run/x/static')
    tree = ast.parse(text)
    values = {t.id: ast.literal_eval(node.value)
              for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets}
    assert tree.body[0].module == 'openstack_dashboard.settings'
    assert values['OPENSTACK_KEYSTONE_URL'] == 'http://10.77.0.11:5000/v3'
    assert values['STATIC_ROOT'] == values['COMPRESS_ROOT'] == \
        '/run/x/static'
    assert values['DEBUG'] is False and values['SECRET_KEY'] == 's' * 64
    compile(horizon.WSGI, 'wsgi', 'exec')


def test_workset_lines_leave_a_line_being_written():
    """A console log read while the guest writes a line: seen in CI.

    The torn line ("elap") made the cloud tests' check fail to parse it
    (ValueError) before this helper left it for the next read.
    """
    from puma_lab import cloud_checks
    done = ('puma-guest: workset state=running rounds=5 pages=8192 '
            'elapsed=5.0\n')
    torn = 'puma-guest: workset state=running rounds=10 pages=8192 elap'
    assert cloud_checks.workset_lines('boot\n' + done + torn) == [
        'state=running rounds=5 pages=8192 elapsed=5.0']
    assert cloud_checks.workset_lines(torn) == []
    assert len(cloud_checks.workset_lines(done + torn + 'sed=10.1\n')) == 2
