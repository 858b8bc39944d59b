# shellcheck shell=bash
# daemon-config.sh — sourced by check.sh and contention.sh: the part of their daemons' wsched.toml that is the same.

# daemon_config_head WORK: the [daemon], [inventory] and [placement] tables of a test daemon whose socket and
# state live in WORK, on the GPU's real readings refreshed every second, with no safety margin but 256 MiB kept.
daemon_config_head() {
	cat <<EOF
[daemon]
socket = "$1/wsched.sock"
state_dir = "$1/state"
log_level = "debug"
[inventory]
refresh_interval = "1s"
[placement]
safety_factor = 1.0
reserved = "256MiB"
EOF
}
