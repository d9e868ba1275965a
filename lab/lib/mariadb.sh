# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# lab/lib/mariadb.sh - a private MariaDB server for the lab cloud.
#
# Depends on: lib/common.sh; Debian's mariadb-server (lab/setup deps, which
# installs it without starting Debian's service).
# Call order: start_mariadb DIR PORT ... mariadb_sql DIR SQL ... stop_mariadb DIR
#
# The server's data directory, socket, pid file and log live in DIR; it
# reads no option file (--no-defaults), listens on 127.0.0.1:PORT of the
# network namespace it is started in and on DIR/mysqld.sock. Debian's
# system instance (/etc/mysql, /var/lib/mysql, port 3306) is never read
# or touched. root logs in over the socket without a password (the unix
# socket belongs to root, in a directory only root may enter); services
# use their own users with passwords over TCP.

MARIADB_BIN=${MARIADB_BIN:-/usr/bin}
MARIADB_SBIN=${MARIADB_SBIN:-/usr/sbin}

# start_mariadb DIR PORT - initialise DIR on first use, start the server;
# returns once it answers on its socket.
start_mariadb()
{
	local dir=$1 port=$2 pid i
	[ -n "$dir" ] && [ -n "$port" ] || die "usage: start_mariadb DIR PORT"
	[ ! -e "$dir/mariadb.pid" ] || die "a MariaDB server already runs in $dir"
	[ -x "$MARIADB_SBIN/mariadbd" ] ||
		die "mariadb-server is not installed (run lab/setup deps)"
	mkdir -p "$dir"
	chmod 700 "$dir"
	if [ ! -d "$dir/data/mysql" ]; then
		"$MARIADB_BIN/mariadb-install-db" --no-defaults --user=root \
			--datadir="$dir/data" --skip-test-db \
			--auth-root-authentication-method=socket \
			>"$dir/install.log" 2>&1 ||
			{ tail -n 20 "$dir/install.log" >&2;
			  die "mariadb-install-db failed in $dir"; }
	fi
	"$MARIADB_SBIN/mariadbd" --no-defaults --user=root \
		--datadir="$dir/data" --socket="$dir/mysqld.sock" \
		--port="$port" --bind-address=127.0.0.1 \
		--pid-file="$dir/mariadbd.pid" --log-error="$dir/error.log" \
		--skip-log-bin --max-connections=500 \
		--innodb-buffer-pool-size=64M --performance-schema=OFF \
		</dev/null >/dev/null 2>&1 &
	pid=$!
	echo "$pid" >"$dir/mariadb.pid"
	for i in $(seq 1 120); do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$dir/error.log" >&2
			rm -f "$dir/mariadb.pid"
			die "MariaDB in $dir exited while starting"
		fi
		mariadb_sql "$dir" 'SELECT 1' >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	stop_mariadb "$dir"
	die "MariaDB in $dir did not answer in 60 s"
}

# mariadb_sql DIR SQL - run SQL as root over the server's socket.
mariadb_sql()
{
	"$MARIADB_BIN/mariadb" --no-defaults -S "$1/mysqld.sock" -u root \
		-B -N -e "$2"
}

# mariadb_create_db DIR NAME USER PASSWORD - database NAME for USER (who
# may log in from anywhere: the server listens in a lab namespace only).
mariadb_create_db()
{
	mariadb_sql "$1" "CREATE DATABASE IF NOT EXISTS \`$2\` CHARACTER SET utf8mb4;
CREATE USER IF NOT EXISTS '$3'@'%' IDENTIFIED BY '$4';
GRANT ALL PRIVILEGES ON \`$2\`.* TO '$3'@'%';"
}

# stop_mariadb DIR - stop the server started in DIR (idempotent).
stop_mariadb()
{
	stop_pidfile "$1/mariadb.pid" mariadbd
}
