#!/usr/bin/env bash
# Sourced by the setup scripts: `apt_install WHO PACKAGE…` installs Debian packages quietly (as
# root; otherwise it says which command to run and fails). WHO prefixes the messages.
apt_install() {
  local who="$1"
  shift
  echo "$who: apt-get install $*"
  if [[ "$(id -u)" != 0 ]]; then
    echo "$who: installing $* needs root (sudo apt-get install $*)" >&2
    return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
