# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# lab/lib/rabbitmq.sh - a private RabbitMQ broker on loopback for tests.
#
# Depends on: lib/common.sh; Debian's rabbitmq-server (lab/setup deps).
# Call order: start_rabbitmq DIR PORT [ADDR] ... stop_rabbitmq DIR
#
# Each broker is its own Erlang node: node name, AMQP port PORT,
# distribution port PORT+1 and its own epmd on PORT+2, all bound to
# 127.0.0.1 (AMQP to ADDR instead when given: the lab cloud's control
# host serves the compute hosts on its lab address); config, cookie,
# mnesia and logs live in DIR.  Nothing of Debian's system-wide broker
# (/etc/rabbitmq, /var/lib/rabbitmq, port 5672, epmd on 4369) is read or
# touched, and stop_rabbitmq ends only the processes start_rabbitmq
# recorded in DIR (the broker's wrapper script, its Erlang node and its
# epmd).

RABBITMQ_BIN=${RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}

# _rabbitmq_env DIR PORT [ADDR] - the environment of the broker in DIR.
_rabbitmq_env()
{
	local dir=$1 port=$2
	printf '%s\n' \
		"HOME=$dir" \
		"RABBITMQ_NODENAME=puma$port@localhost" \
		"RABBITMQ_USE_LONGNAME=false" \
		"RABBITMQ_NODE_IP_ADDRESS=${3:-127.0.0.1}" \
		"RABBITMQ_NODE_PORT=$port" \
		"RABBITMQ_DIST_PORT=$((port + 1))" \
		"ERL_EPMD_PORT=$((port + 2))" \
		"ERL_EPMD_ADDRESS=127.0.0.1" \
		"RABBITMQ_CONF_ENV_FILE=$dir/rabbitmq-env.conf" \
		"RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf" \
		"RABBITMQ_ADVANCED_CONFIG_FILE=$dir/advanced.config" \
		"RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins" \
		"RABBITMQ_MNESIA_BASE=$dir/mnesia" \
		"RABBITMQ_LOG_BASE=$dir/log" \
		"RABBITMQ_PID_FILE=$dir/beam.pid"
}

# _port_open PORT [ADDR] - true when something accepts on ADDR:PORT
# (127.0.0.1 by default).
_port_open()
{
	(exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null
}

# start_rabbitmq DIR PORT [ADDR] - start the broker; returns once AMQP
# answers. The URL is then rabbit://guest:guest@127.0.0.1:PORT/ (guest may
# log in from loopback only, RabbitMQ's default); with ADDR, AMQP listens
# there only and guest may log in from anywhere (the lab's namespaces).
start_rabbitmq()
{
	local dir=$1 port=$2 addr=${3:-127.0.0.1} pid i envv
	if [ -z "$dir" ] || [ -z "$port" ]; then
		die "usage: start_rabbitmq DIR PORT"
	fi
	[ -x "$RABBITMQ_BIN/rabbitmq-server" ] ||
		die "rabbitmq-server is not installed (run lab/setup deps)"
	[ ! -e "$dir/rabbitmq.pid" ] || die "a broker already runs in $dir"
	for i in 0 1 2; do
		! _port_open $((port + i)) || die "port $((port + i)) is in use"
	done
	mkdir -p "$dir/mnesia" "$dir/log"
	: >"$dir/rabbitmq-env.conf"
	echo '[].' >"$dir/enabled_plugins"
	cat >"$dir/rabbitmq.conf" <<-CONF
	listeners.tcp.default = $addr:$port
	log.file.level = info
	log.console = false
	CONF
	[ "$addr" = 127.0.0.1 ] || echo 'loopback_users = none' >>"$dir/rabbitmq.conf"
	_rabbitmq_env "$dir" "$port" "$addr" >"$dir/env"
	mapfile -t envv <"$dir/env"

	env ERL_EPMD_PORT=$((port + 2)) ERL_EPMD_ADDRESS=127.0.0.1 \
		epmd -port $((port + 2)) >"$dir/log/epmd.log" 2>&1 &
	echo $! >"$dir/epmd.pid"
	# exec chain: rabbitmq-server -> erl -> beam.smp keeps this PID.
	(cd "$dir" && exec env "${envv[@]}" \
		"$RABBITMQ_BIN/rabbitmq-server" >"$dir/log/console.log" 2>&1) &
	pid=$!
	echo "$pid" >"$dir/rabbitmq.pid"
	for i in $(seq 1 240); do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$dir/log/console.log" >&2
			stop_rabbitmq "$dir"
			die "RabbitMQ in $dir exited while starting"
		fi
		_port_open "$port" "$addr" && return 0
		sleep 0.5
	done
	stop_rabbitmq "$dir"
	die "RabbitMQ in $dir did not open port $port in 120 s"
}

# stop_rabbitmq DIR - stop the broker started in DIR (idempotent).
stop_rabbitmq()
{
	local dir=$1
	# The wrapper script forwards TERM to the node and waits for it;
	# beam.pid (written by the node) catches a node that outlived it.
	stop_pidfile "$dir/rabbitmq.pid" rabbitmq-server
	stop_pidfile "$dir/beam.pid" beam.smp
	stop_pidfile "$dir/epmd.pid" epmd
}
