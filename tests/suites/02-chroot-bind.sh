#!/usr/bin/env bash
# server: none (no database)
# chroot_bind (scripts/lib/chroot.sh) is how the repository reaches the sid chroots that
# build the extension for PHP 8.4/8.5. CI clones into the same path every run and deletes
# the clone after, so the bind from the last run is still there, on a deleted directory:
# the next run must replace it, not build in it. Each case runs on a scratch root (a plain
# directory: chroot_bind needs no chroot), so nothing here touches the real chroots.
set -uo pipefail
cd "${MYSQLLOCK_ROOT:-$(dirname "$0")/../..}"
me=chroot-bind
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
# shellcheck source=scripts/lib/chroot.sh
. scripts/lib/chroot.sh

[ "$(id -u)" -eq 0 ] || { echo "$me: needs root (mount --bind), as scripts/sid.sh does"; exit 1; }

scratch=$(mktemp -d /var/tmp/mysqllock-chroot-bind.XXXXXX) && [ -d "$scratch" ] \
  || { echo "$me: cannot make a scratch directory under /var/tmp"; exit 1; }
root=$scratch/root
mkdir -p "$root"
# Every mount under the scratch directory comes off before anything is removed: a bind
# still in place would let rm reach the directory it shows.
cleanup() {
  local mount
  [ -n "$scratch" ] && [ "$scratch" != / ] || return 0
  for _ in 1 2 3; do
    awk -v s="$scratch/" 'index($5, s) == 1 { print $5 }' /proc/self/mountinfo | sort -r \
      | while read -r mount; do umount -l "$mount" 2>/dev/null; done
  done
  if awk -v s="$scratch/" 'index($5, s) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    echo "$me: mounts left under $scratch; not removing it" >&2
  else
    rm -rf "$scratch"
  fi
}
trap cleanup EXIT

passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }

# sees PATH MARK: the root shows PATH's current contents (its marker file says MARK).
sees() { [ "$(cat "$root$1/marker" 2>/dev/null)" = "$2" ]; }

case_a_path_is_bound_at_its_own_path() {
  local path=$scratch/host/repo-a
  mkdir -p "$path" && echo first >"$path/marker"
  if (chroot_bind "$root" "$path") && sees "$path" first; then
    ok "a path is bound into the root at its own path"
  else
    not_ok "a path is bound into the root at its own path: $root$path shows '$(cat "$root$path/marker" 2>&1)'"
  fi
}

case_a_bind_left_on_a_removed_clone_is_replaced() {
  local path=$scratch/host/repo-b
  mkdir -p "$path" && echo old-clone >"$path/marker"
  (chroot_bind "$root" "$path") || { not_ok "first bind of $path failed"; return; }
  # The clone is deleted and made again at the same path, as CI does each run.
  rm -rf "$path" && mkdir -p "$path" && echo new-clone >"$path/marker"
  if (chroot_bind "$root" "$path") && sees "$path" new-clone; then
    ok "a bind left on a removed clone is replaced by the clone now at that path"
  else
    not_ok "a bind left on a removed clone is replaced: $root$path shows '$(cat "$root$path/marker" 2>&1)', not new-clone"
  fi
}

case_a_path_the_root_already_sees_is_not_bound_again() {
  local shared=$scratch/host/shared path
  path=$shared/clone
  mkdir -p "$path" && echo seen >"$path/marker"
  # The root sees the parent, as a sid chroot sees the host's /tmp.
  (chroot_bind "$root" "$shared") || { not_ok "bind of $shared failed"; return; }
  (chroot_bind "$root" "$path") || { not_ok "bind of $path failed"; return; }
  if ! mountpoint -q "$root$path" && sees "$path" seen; then
    ok "a path the root already sees is not bound again (it stays removable)"
  else
    not_ok "a path the root already sees was bound again: $root$path is a mount point"
  fi
}

case_binds_at_once_all_see_the_path() {
  local path=$scratch/host/repo-d i
  mkdir -p "$path" && echo stale >"$path/marker"
  (chroot_bind "$root" "$path") || { not_ok "first bind of $path failed"; return; }
  rm -rf "$path" && mkdir -p "$path" && echo fresh >"$path/marker"
  # Four suites bind at once over a stale bind: none may take off another's new bind,
  # so each, right after its own call returns, sees the fresh clone.
  for i in 1 2 3 4; do
    ( (chroot_bind "$root" "$path") && sees "$path" fresh ) &
  done
  local bad=0
  for i in 1 2 3 4; do wait -n || bad=$((bad + 1)); done
  if [ "$bad" -eq 0 ] && sees "$path" fresh; then
    ok "binds made at once over a stale bind each see the path afterwards"
  else
    not_ok "binds made at once over a stale bind: $bad of 4 did not see the fresh clone"
  fi
}

case_a_path_is_bound_at_its_own_path
case_a_bind_left_on_a_removed_clone_is_replaced
case_a_path_the_root_already_sees_is_not_bound_again
case_binds_at_once_all_see_the_path
echo "chroot-bind: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
