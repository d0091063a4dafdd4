# Sourced by the install_*.sh scripts: install Debian packages, once, as root, one install at a time.
#
#   install_debian_packages WHAT MISSING PACKAGE...
# MISSING names a function that prints what the caller needs and the machine lacks (nothing: all
# there). Returns at once when nothing is missing; without root it says so and exits 1 without
# changing anything. Else it takes tfbench's install lock (two installs at once, e.g. the Slurm and
# the container tests of one test run, go one after the other), asks MISSING again (the other
# may have installed it meanwhile), and apt-get installs the packages (no recommends), waiting up
# to APT_WAIT_S for apt's and dpkg's own locks (another apt-get, unattended-upgrades).
INSTALL_LOCK=/run/lock/tfbench-debian-packages.lock
APT_WAIT_S=600

install_debian_packages() {
  local what=$1 check=$2 missing lock started
  shift 2
  missing=$("$check")
  if [ -z "$missing" ]; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "tfbench: installing $what needs root (missing: $missing); run: sudo $0" >&2
    exit 1
  fi
  exec {lock}>>"$INSTALL_LOCK"
  flock "$lock"
  missing=$("$check")
  if [ -n "$missing" ]; then
    echo "tfbench: installing $* (missing: $missing)" >&2
    started=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends "$@" >/dev/null
    missing=$("$check")
    if [ -n "$missing" ]; then
      echo "tfbench: apt-get installed $* but $what still lacks: $missing" >&2
      exit 1
    fi
    echo "tfbench: installed $what in $((SECONDS - started)) s" >&2
  fi
  exec {lock}>&-
}

# apt-get "$@"; while another process holds apt's or dpkg's lock it waits (up to APT_WAIT_S):
# dpkg's through apt's own DPkg::Lock::Timeout, the package lists' (apt-get update, which that
# option does not cover) by trying again every 2 s. Its output goes to stdout, or to stderr when it fails.
apt_get() {
  local deadline=$((SECONDS + APT_WAIT_S)) out code
  while :; do
    out=$(apt-get -o DPkg::Lock::Timeout="$APT_WAIT_S" "$@" 2>&1) && code=0 || code=$?
    if [ "$code" -eq 0 ]; then
      [ -z "$out" ] || printf '%s\n' "$out"
      return 0
    fi
    if ! grep -q "Could not get lock" <<<"$out" || [ "$SECONDS" -ge "$deadline" ]; then
      printf '%s\n' "$out" >&2
      return "$code"
    fi
    sleep 2
  done
}
