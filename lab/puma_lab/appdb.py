# SPDX-License-Identifier: Apache-2.0
"""A read-mostly database workload for guests: SQLite point lookups.

``make(path, size_mb)`` writes, on the host, a SQLite database of about
SIZE_MB: one table ``kv(id INTEGER PRIMARY KEY, v BLOB)`` of rows with
ROW_BYTES of random data (about four rows per 4 KiB page, so a lookup of
a random key reads one random leaf page below a few interior pages that
stay cached).  ``run(guest, db, rows, seconds)`` feeds lookups of
uniform random keys (``query``) to the guest's ``sqlite3`` for SECONDS
and returns the queries answered per second.  The database is opened
read-only and immutable (``file:...?immutable=1``): the data disk is
mounted read-only, and SQLite then takes no locks.
"""

import os
import sqlite3

from puma_lab import errors

ROW_BYTES = 900
ROWS_PER_TX = 5000


def rows_for(size_mb):
    return max(1, size_mb * 1024 * 1024 // (ROW_BYTES + 124))


def make(path, size_mb):
    """A database of about SIZE_MB at PATH; returns its row count."""
    rows = rows_for(size_mb)
    if os.path.exists(path):
        os.unlink(path)
    con = sqlite3.connect(path)
    try:
        con.execute('PRAGMA journal_mode=OFF')
        con.execute('PRAGMA synchronous=OFF')
        con.execute('CREATE TABLE kv (id INTEGER PRIMARY KEY, v BLOB)')
        for start in range(0, rows, ROWS_PER_TX):
            n = min(ROWS_PER_TX, rows - start)
            con.executemany('INSERT INTO kv VALUES (?, ?)',
                            ((start + i, os.urandom(ROW_BYTES))
                             for i in range(n)))
            con.commit()
    finally:
        con.close()
    return rows


def query(rows):
    """One lookup of a key drawn by SQLite itself, uniform below ROWS.

    SQLite seeds random() from the OS in every process: no two runs
    read the same keys (a fixed query list would make a measured run
    re-read what the warm-up before it has just cached).
    """
    return 'SELECT length(v) FROM kv WHERE id=abs(random()) %% %d;' % rows


def run(guest, db, rows, seconds):
    """Queries per second the guest's sqlite3 answers from DB."""
    res = guest.run("yes '%s' | timeout %d sqlite3 -batch "
                    "'file:%s?immutable=1' | wc -l"
                    % (query(rows), seconds, db),
                    timeout=seconds * 4 + 300, check=False)
    try:
        answered = int(res.out.split()[-1])
    except (IndexError, ValueError):
        raise errors.LabError('%s: sqlite3 gave no count: %r %r'
                              % (guest.name, res.out, res.err))
    if not answered:
        raise errors.LabError('%s: sqlite3 answered no query: %r'
                              % (guest.name, res.err))
    return round(answered / float(seconds), 1)
