# SPDX-License-Identifier: Apache-2.0
# lab/lib/steps.sh - the order lab/setup runs its steps in; sourced after
# common.sh. The caller defines run_step STEP.

# What a step needs comes before it: image, kvm and khost need the guest
# kernels, nova needs libvirt (stack).
SETUP_STEPS="deps kernels stack image kvm khost nova cloud"

# Steps that mostly download and unpack (the guest image's debootstrap,
# the cloud's PyPI environments) and need nothing that stack builds: they
# run beside the compiles of QEMU, libvirt and the KVM series. A cold
# setup spent about 2.5 of its 22 minutes in them (2026-11-28).
SETUP_BESIDE_BUILDS="image cloud"

# order_steps STEP... - each step once, in the order of SETUP_STEPS.
order_steps()
{
	local step out=
	for step in $SETUP_STEPS; do
		case " $* " in *" $step "*) out="$out $step" ;; esac
	done
	echo $out
}

# run_steps STEP... - run_step each STEP in order; when stack is one of
# them, the steps of SETUP_BESIDE_BUILDS among them start in the
# background when stack does. Waits for them and fails if one did.
run_steps()
{
	local step s side= side_pid= n=0 total start=$SECONDS
	case " $* " in
	*" stack "*)
		for s in $SETUP_BESIDE_BUILDS; do
			case " $* " in *" $s "*) side="$side $s" ;; esac
		done
		;;
	esac
	total=$(($# - $(echo $side | wc -w)))
	for step in "$@"; do
		case " $side " in *" $step "*) continue ;; esac
		if [ -n "$side" ] && [ -z "$side_pid" ] && [ "$step" = stack ]; then
			(
				for s in $side; do
					info "setup step ($s), beside the builds, $(elapsed $((SECONDS - start))) elapsed"
					run_step "$s"
				done
			) &
			side_pid=$!
		fi
		n=$((n + 1))
		info "setup step $n/$total ($step), $(elapsed $((SECONDS - start))) elapsed"
		run_step "$step"
	done
	if [ -n "$side_pid" ]; then
		info "waiting for the steps beside the builds:$side"
		wait "$side_pid" || die "setup step(s)$side failed (see above)"
	fi
	info "setup done ($*) in $(elapsed $((SECONDS - start)))"
}
