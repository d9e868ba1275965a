# SPDX-License-Identifier: Apache-2.0
"""Measurements of ``./lab/bench cloud``, run inside the control namespace.

Like :mod:`puma_lab.cloud_ops`, :mod:`puma_lab.benches.cloud` runs this
module with the cloud environment's Python in the control host's network
namespace, where the services and MariaDB are reachable. Commands (one
JSON argument each; the answer is one JSON line)::

    migrate-timed {"osc": [argv...], "server": UUID, "host": H,
                   "db": URL, "timeout": s}
    split-timed   {"cloud": NAME, "server": UUID, "host": H, "db": URL,
                   "timeout": s}
    pairs         {"db": URL, "add": N} or {"db": URL, "remove": true}
    get-latency   {"cloud": NAME, "path": "/v1/pairs", "n": N,
                   "version": "1.0"}
"""

import json
import subprocess
import sys
import time
import urllib.parse

FINAL = ('completed', 'error', 'failed', 'cancelled')
POLL_S = 0.2
# The pairs the bench adds are named so that it removes only those.
PAIR_PREFIX = 'bench-pair-'


def connect(url):
    """A pymysql connection for an SQLAlchemy URL mysql+pymysql://..."""
    import pymysql
    u = urllib.parse.urlsplit(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306,
                           user=urllib.parse.unquote(u.username),
                           password=urllib.parse.unquote(u.password),
                           database=u.path.lstrip('/'), autocommit=True)


def last_migration(db, server):
    with db.cursor() as cur:
        cur.execute('SELECT id, status FROM migrations WHERE '
                    'instance_uuid = %s ORDER BY id DESC LIMIT 1', (server,))
        row = cur.fetchone()
    return row or (0, None)


def migrate_timed(osc, server, host, db, timeout):
    """``openstack server migrate --live-migration`` until Nova is done.

    Timed from the start of the command to the first poll (every POLL_S)
    of Nova's own record of the migration (its cell database, what
    ``openstack server migration list`` shows) that finds it in a final
    state.
    """
    conn = connect(db)
    before, _ = last_migration(conn, server)
    start_wall = time.time()
    t0 = time.monotonic()
    p = subprocess.run(list(osc) + ['--os-compute-api-version', '2.30',
                                    'server', 'migrate', '--live-migration',
                                    '--host', host, server],
                       capture_output=True, text=True, timeout=timeout)
    cli_s = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit('openstack server migrate failed (%d): %s'
                         % (p.returncode, p.stderr.strip()[-2000:]))
    mig, status = _wait_final(conn, server, before, t0, timeout)
    return {'cli_s': round(cli_s, 3),
            'total_s': round(time.monotonic() - t0, 3),
            'status': status, 'migration': mig,
            # The wall clock of the run, to find its marks in the logs.
            'start_wall': start_wall, 'end_wall': time.time()}


def _wait_final(conn, server, before, t0, timeout):
    """Poll Nova's record until SERVER's newest migration is final."""
    while True:
        mig, status = last_migration(conn, server)
        if mig > before and status in FINAL:
            return mig, status
        if time.monotonic() - t0 > timeout:
            raise SystemExit('migration of %s not over in %s s (%s)'
                             % (server, timeout, status))
        time.sleep(POLL_S)


def split_timed(cloud, server, host, db, timeout):
    """puma-api's ``POST /v1/split-migrations`` until Nova is done.

    The same split as migrate_timed, asked the way a long-lived client
    does (Horizon, an orchestrator): a Keystone session authenticated
    beforehand, so no client start and no authentication are timed.
    Timed from the POST to the poll that finds the migration final.
    """
    import openstack
    os_conn = openstack.connect(cloud=cloud)
    url = os_conn.endpoint_for('memory-pool').rstrip('/') + \
        '/v1/split-migrations'
    os_conn.session.get_token()
    conn = connect(db)
    before, _ = last_migration(conn, server)
    t0 = time.monotonic()
    r = os_conn.session.post(url, json={'server': server, 'host': host},
                             raise_exc=False)
    post_s = time.monotonic() - t0
    if r.status_code != 202:
        raise SystemExit('POST /v1/split-migrations answered %d: %s'
                         % (r.status_code, r.text[-2000:]))
    mig, status = _wait_final(conn, server, before, t0, timeout)
    return {'post_s': round(post_s, 3),
            'total_s': round(time.monotonic() - t0, 3),
            'status': status, 'migration': mig,
            'state': r.json()['split_migration']['state']}


def pairs(db, add=0, remove=False):
    """Add ADD lending pairs to puma's database, or remove those added."""
    conn = connect(db)
    with conn.cursor() as cur:
        if remove:
            n = cur.execute('DELETE FROM pairs WHERE lender LIKE %s',
                            (PAIR_PREFIX + '%',))
            return {'removed': n}
        rows = [(PAIR_PREFIX + 'l%05d' % i, PAIR_PREFIX + 'b%05d' % i,
                 'a', 'b', 64, '%064x' % i) for i in range(add)]
        n = cur.executemany(
            'INSERT INTO pairs (lender, borrower, lender_host, '
            'borrower_host, capacity_mb, `key`, created_at) VALUES '
            '(%s, %s, %s, %s, %s, %s, UTC_TIMESTAMP())', rows)
        cur.execute('SELECT COUNT(*) FROM pairs')
        return {'added': n, 'total': cur.fetchone()[0]}


def get_latency(cloud, path, n, version):
    """Latencies (ms) of N GETs of PATH on puma-api, one after the other.

    A Keystone token is taken first (keystoneauth's session, as the
    ``openstack`` client does); each request then costs what the API and
    keystonemiddleware's cached token validation cost.
    """
    import openstack
    conn = openstack.connect(cloud=cloud)
    url = conn.endpoint_for('memory-pool').rstrip('/') + path
    headers = {'OpenStack-API-Version': 'memory-pool %s' % version}
    items = None
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        r = conn.session.get(url, headers=headers, raise_exc=True)
        times.append(round((time.monotonic() - t0) * 1000, 2))
        items = len(next(iter(v for k, v in r.json().items()
                              if isinstance(v, list))))
    return {'ms': times, 'items': items}


def main(argv):
    cmd, arg = argv[1], json.loads(argv[2])
    if cmd == 'migrate-timed':
        out = migrate_timed(arg['osc'], arg['server'], arg['host'],
                            arg['db'], arg['timeout'])
    elif cmd == 'split-timed':
        out = split_timed(arg['cloud'], arg['server'], arg['host'],
                          arg['db'], arg['timeout'])
    elif cmd == 'pairs':
        out = pairs(arg['db'], arg.get('add', 0), arg.get('remove', False))
    elif cmd == 'get-latency':
        out = get_latency(arg['cloud'], arg['path'], arg['n'],
                          arg.get('version', '1.0'))
    else:
        raise SystemExit('unknown command %r' % cmd)
    print(json.dumps(out))


if __name__ == '__main__':
    main(sys.argv)
