#!/bin/bash
# shellcheck shell=bash
#
# devstack/plugin.sh - dispatch devstack's phases to lib/puma.

# shellcheck source=devstack/lib/puma
source "$(dirname "${BASH_SOURCE[0]}")/lib/puma"

# A split migration involves three computes (source, main and sub host)
# and lending pairs two, so compute-only nodes need the driver too: every
# phase acts on the services this node runs.
if is_service_enabled puma-scheduler puma-api n-cpu; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing Puma"
        install_puma
        if is_service_enabled horizon; then
            install_puma_dashboard
        fi
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring Puma"
        if is_service_enabled n-cpu; then
            configure_nova_for_puma
        fi
        if is_service_enabled puma-scheduler puma-api; then
            configure_puma
            if is_service_enabled keystone; then
                create_puma_accounts
            fi
        fi
        # The scheduler's node owns the schema (one node recreates it).
        if is_service_enabled puma-scheduler; then
            init_puma
        fi
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        echo_summary "Starting Puma"
        start_puma
    fi

    if [[ "$1" == "unstack" ]]; then
        stop_puma
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_puma
    fi
fi
