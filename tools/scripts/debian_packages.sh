# Sourced by the install_*.sh scripts: install Debian packages, once, as root.
#
#   install_debian_packages WHAT "MISSING" PACKAGE...
# returns at once when MISSING (what the caller found absent) is empty; without root it says so
# and exits 1 without changing anything; else apt-get installs the packages (no recommends).
install_debian_packages() {
  local what=$1 missing=$2
  shift 2
  if [ -z "$missing" ]; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "tfbench: installing $what needs root (missing: $missing); run: sudo $0" >&2
    exit 1
  fi
  echo "tfbench: installing $* (missing: $missing)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
