#!/usr/bin/env bash
# server: none (no database)
# chroot_run (scripts/lib/chroot.sh) is the one way into the project's chroots: each command
# gets a mount namespace of its own, where /proc, /dev, /tmp and its binds exist for it
# alone, and a clean, listed environment. Before it, binds of the host's /tmp, /dev, Rust
# toolchain and repository stayed under /var/cache/mysqllock after the commands ended,
# and an `rm -rf` of the cache went through them into the host's files (issue 37); a
# caller's TMPDIR reached the chroot and broke a package's postinst (issue 35). Checked
# here on scratch roots under /var/tmp (a tiny root made of the host's own binaries, and
# a stand-in apt-get), so the real chroots are untouched: what a command sees, that no
# mount of it is left anywhere once it has ended or was killed, four commands at once,
# that removing the cache leaves a bound host directory alone, the sweep of an older
# script's leftover mounts, chroot_clean, and a foreign TMPDIR. Needs root (mounts).
set -uo pipefail
cd "${MYSQLLOCK_ROOT:-$(dirname "$0")/../..}"
repo=$PWD
me=chroot-run
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
# shellcheck source=scripts/lib/chroot.sh
. scripts/lib/chroot.sh

[ "$(id -u)" -eq 0 ] || { echo "$me: needs root (mounts, chroot), as scripts/sid.sh does"; exit 1; }
for tool in unshare nsenter flock ldd; do
  command -v "$tool" >/dev/null || { echo "$me: $tool is missing"; exit 1; }
done

# The suite runs in a mount namespace of its own whose /tmp is a scratch directory:
# chroot_run binds /tmp into every root, so should the rule ever break (a mount outliving
# its command, in the caller's namespace), an rm here could otherwise go through such a
# bind into the machine's real /tmp. (Seen once, while this suite was proved by breaking
# chroot_run on purpose: it emptied the shared machine's /tmp.)
if [ "${MYSQLLOCK_CHROOT_RUN_OWN_TMP:-}" != 1 ]; then
  own_tmp=$(mktemp -d /var/tmp/mysqllock-chroot-run-tmp.XXXXXX) && [ -d "$own_tmp" ] \
    || { echo "$me: cannot make a scratch /tmp under /var/tmp"; exit 1; }
  chmod 1777 "$own_tmp"
  # shellcheck disable=SC2016 # the inner shell expands
  unshare --mount --propagation private -- /bin/bash -c \
    'mount --bind "$1" /tmp && MYSQLLOCK_CHROOT_RUN_OWN_TMP=1 exec /bin/bash "$2"' _ "$own_tmp" "$0"
  rc=$?
  # Its mounts ended with the namespace: none of them was ever in this one.
  rm -rf --one-file-system "$own_tmp"
  exit $rc
fi

scratch=$(mktemp -d /var/tmp/mysqllock-chroot-run.XXXXXX) && [ -d "$scratch" ] \
  || { echo "$me: cannot make a scratch directory under /var/tmp"; exit 1; }
# The host's /tmp is bound into every root: what the commands leave there goes here.
shared=$(mktemp -d /tmp/mysqllock-chroot-run.XXXXXX) && [ -d "$shared" ] \
  || { echo "$me: cannot make a scratch directory under /tmp"; exit 1; }
cache=$scratch/cache
host=$scratch/host
mkdir -p "$cache" "$host"
echo "host data" >"$host/marker"
echo "host tmp data" >"$shared/marker"
started=$SECONDS
pids=()
# Whatever a case started is killed, and every mount under the scratch directory (in this
# namespace) comes off before anything is removed: a bind still in place would let rm
# reach the directory it shows.
cleanup() {
  local pid mount
  for pid in ${pids[@]+"${pids[@]}"}; do kill -9 -- "-$pid" "$pid" 2>/dev/null; done
  [ -n "$scratch" ] && [ "$scratch" != / ] || return 0
  for _ in 1 2 3; do
    chroot_host_mounts "$scratch" | while read -r mount; do umount -l "$mount" 2>/dev/null; done
  done
  if [ -n "$(chroot_host_mounts "$scratch")" ]; then
    echo "$me: mounts left under $scratch; not removing it" >&2
  else
    rm -rf --one-file-system "$scratch"
  fi
  rm -rf "$shared"
}
trap cleanup EXIT

passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }

# tiny_root DIR: a tiny root made of the host's own binaries (and their libraries, as ldd
# names them), laid out as Debian's (merged /usr), with a stand-in apt-get: it "installs"
# a package the way a postinst does, through a temporary file in TMPDIR (mktemp), and
# records it in /var/lib/tiny/PACKAGE; the package `slow` first says so in
# $MYSQLLOCK_TEST_HOLD/started and then waits to be killed.
tiny_root() {
  local r=$1 tool lib
  mkdir -p "$r/usr/bin" "$r/usr/lib" "$r/usr/lib64" "$r/usr/sbin" "$r/var/lib/tiny"
  ln -s usr/bin "$r/bin" && ln -s usr/lib "$r/lib" && ln -s usr/lib64 "$r/lib64" && ln -s usr/sbin "$r/sbin"
  for tool in bash env cat mktemp mv rm sleep touch true; do
    cp "/usr/bin/$tool" "$r/usr/bin/$tool"
    for lib in $(ldd "/usr/bin/$tool" | grep -o '/[^ ]*'); do
      [ -e "$r$lib" ] || { mkdir -p "$(dirname "$r$lib")" && cp -L "$lib" "$r$lib"; }
    done
  done
  cat >"$r/usr/bin/apt-get" <<'SH'
#!/bin/bash
set -e
package=${*: -1}
note=$(mktemp)
echo "installed $package" >"$note"
if [ "$package" = slow ]; then
  touch "$MYSQLLOCK_TEST_HOLD/started"
  sleep 60 # the behaviour under test: an install that hangs until the case kills it
fi
mv "$note" "/var/lib/tiny/$package"
SH
  chmod +x "$r/usr/bin/apt-get"
}
template=$scratch/template
tiny_root "$template" || { echo "$me: cannot make a tiny root in $template"; exit 1; }

# new_root NAME: a copy of the tiny root in the scratch cache; prints its path.
new_root() {
  cp -a "$template" "$cache/$1" && echo "$cache/$1"
}

# What INSTALL of chroot_ensure runs in the tiny roots (its steps chained with &&).
tiny_install() { chroot_apt "$1" install tiny; }
slow_install() { chroot_apt "$1" install slow; }

# everywhere DIR: "PID MOUNT" of every mount under DIR in any mount namespace.
everywhere() { chroot_ns_mounts "$1"; }

# gone_within SECONDS DIR: polls until no namespace has a mount under DIR.
gone_within() {
  local end=$((SECONDS + $1))
  while [ -n "$(everywhere "$2")" ]; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.05 # the poll interval of this deadline-bounded wait
  done
}

# wait_root SECONDS PID ROOT: polls until process PID runs in ROOT (its root directory).
wait_root() {
  local end=$((SECONDS + $1))
  until [ "/proc/$2/root" -ef "$3" ]; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.05 # the poll interval of this deadline-bounded wait
  done
}

# wait_file SECONDS FILE: polls until FILE exists.
wait_file() {
  local end=$((SECONDS + $1))
  until [ -e "$2" ]; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.05 # the poll interval of this deadline-bounded wait
  done
}

case_a_command_sees_its_mounts_and_they_end_with_it() {
  local root out
  root=$(new_root sees)
  # shellcheck disable=SC2016 # the chroot's shell expands
  out=$(chroot_run "$root" --bind "$host" --cwd "$host" -- /bin/bash -c '
    [ -e /proc/self/status ] && echo proc
    [ -c /dev/null ] && echo dev
    cat "$1/marker"
    cat marker' _ "$shared" 2>&1)
  if [ "$out" = "$(printf 'proc\ndev\nhost tmp data\nhost data')" ]; then
    ok "a command sees /proc, /dev, the host's /tmp and its bind (in its --cwd)"
  else
    not_ok "a command sees /proc, /dev, /tmp and its bind: it printed '$out'"
  fi
  if [ -z "$(everywhere "$root")" ]; then
    ok "once it has ended, no mount namespace on the machine has a mount under the root"
  else
    not_ok "mounts left under $root after the command ended: $(everywhere "$root" | tr '\n' ' ')"
  fi
}

case_a_killed_command_leaves_no_mount() {
  local root chroot_cmd n
  root=$(new_root killed)
  chroot_command "$root" --bind "$host" -- /bin/bash -c 'touch "$1/up"; exec sleep 60' _ "$shared"
  setsid "${chroot_cmd[@]}" &
  pids+=($!)
  wait_file 10 "$shared/up" || { not_ok "the command to kill did not start"; return; }
  # The checker must see the mounts of a live command, or its "none" below means nothing.
  n=$(everywhere "$root" | wc -l)
  if [ "$n" -ge 4 ] && [ -z "$(chroot_host_mounts "$root")" ]; then
    ok "a running command's mounts ($n under the root) are in its own namespace, none in the caller's"
  else
    not_ok "a running command: $n mounts seen under the root in any namespace (want 4 or more), the caller's: $(chroot_host_mounts "$root" | tr '\n' ' ')"
  fi
  kill -9 "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null
  if gone_within 5 "$root"; then
    ok "a command killed with SIGKILL leaves no mount under the root, in any namespace"
  else
    not_ok "after kill -9: $(everywhere "$root" | tr '\n' ' ')"
  fi
}

case_four_commands_at_once_see_the_bind() {
  local root i bad=0 ran=()
  root=$(new_root four)
  mkdir -p "$shared/four"
  # Each says it is up, then waits for the others, so the four overlap for sure.
  for i in 1 2 3 4; do
    # shellcheck disable=SC2016 # the chroot's shell expands
    chroot_run "$root" --bind "$host" -- /bin/bash -c '
      touch "$1/four/$2"
      end=$((SECONDS + 10))
      until [ -e "$1/four/1" ] && [ -e "$1/four/2" ] && [ -e "$1/four/3" ] && [ -e "$1/four/4" ]; do
        [ $SECONDS -lt $end ] || exit 3
        sleep 0.05 # the poll interval of this deadline-bounded wait
      done
      [ "$(cat "$3/marker")" = "host data" ]' _ "$shared" "$i" "$host" &
    ran+=($!)
  done
  for i in "${ran[@]}"; do wait "$i" || bad=$((bad + 1)); done
  if [ "$bad" -eq 0 ] && [ -z "$(everywhere "$root")" ]; then
    ok "four commands at once on one root with the same bind each see it, and leave nothing mounted"
  else
    not_ok "four commands at once: $bad of 4 did not see the bind together; left: $(everywhere "$root" | tr '\n' ' ')"
  fi
}

case_removing_the_cache_leaves_the_host_alone() {
  local root fake_tmp out
  root=$(new_root removed)
  fake_tmp=$scratch/fake-tmp
  mkdir -p "$fake_tmp" && echo "tmp data" >"$fake_tmp/marker"
  # The run and the removal happen in a mount namespace of this case's own, whose /tmp is
  # a scratch directory: should the rule ever break (a mount of chroot_run outliving its
  # command), the rm below would reach only that directory and $host, never the host's
  # real /tmp. The rm is what an administrator or a disk cleaner does to /var/cache; a bind
  # of the same file system as the cache is no other device to --one-file-system, so only
  # the rule keeps the bound directories out of its reach.
  # shellcheck disable=SC2016 # the inner shell expands
  out=$(unshare --mount --propagation private -- /bin/bash -c '
    mount --bind "$1" /tmp || exit 3
    me=chroot-run
    . scripts/lib/servers.sh && . scripts/lib/chroot.sh
    chroot_run "$2" --bind "$3" -- /bin/true || { echo "the command failed"; exit 1; }
    rm -rf --one-file-system "$2" 2>&1
    echo "root left: $([ -e "$2" ] && echo yes || echo no); bound: $(cat "$3/marker" 2>&1); /tmp: $(cat /tmp/marker 2>&1)"
    ' _ "$fake_tmp" "$root" "$host" 2>&1)
  if [ "$out" = "root left: no; bound: host data; /tmp: tmp data" ]; then
    ok "rm -rf --one-file-system of the cache root after a run leaves the bound host directory and /tmp intact"
  else
    not_ok "rm -rf --one-file-system of the cache root after a run: $out"
  fi
}

# What the scripts before chroot_run left on a machine, in the host's namespace: two binds
# stacked at one place, one of a clone deleted since (CI deletes its clone after a run),
# and /proc. Four mounts.
leave_old_mounts() {
  local root=$1 clone=$scratch/clone
  mkdir -p "$root$host" "$root/proc" "$clone" "$root$clone"
  echo "clone" >"$clone/file"
  mount --bind "$host" "$root$host" && mount --bind "$host" "$root$host" \
    && mount --bind "$clone" "$root$clone" && mount -t proc proc "$root/proc"
  local rc=$?
  rm -rf "$clone"
  return $rc
}

case_an_older_runs_mounts_are_swept_by_the_next_use() {
  local root out n
  root=$(new_root swept)
  chroot_ensure "$root" tiny tiny_install 2>/dev/null || { not_ok "chroot_ensure of a tiny root failed"; return; }
  leave_old_mounts "$root" || { not_ok "could not make the old mounts"; return; }
  n=$(chroot_host_mounts "$root" | wc -l)
  # A process of an older script that still runs there relies on them: they stay.
  # (The one bare chroot here: it stands for the scripts before chroot_run.)
  chroot "$root" /usr/bin/sleep 60 &
  pids+=($!)
  wait_root 10 "${pids[-1]}" "$root" || { not_ok "the older script's stand-in did not start"; return; }
  out=$( (chroot_ensure "$root" tiny tiny_install) 2>&1)
  if [ "$(chroot_host_mounts "$root" | wc -l)" = "$n" ] && [[ $out == *"older script's processes still run there"* ]]; then
    ok "mounts an older script's running process relies on are left alone, saying so"
  else
    not_ok "an older script's running process: $(chroot_host_mounts "$root" | wc -l) of $n mounts left, said: $out"
  fi
  kill -9 "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null
  out=$( (chroot_ensure "$root" tiny tiny_install) 2>&1)
  if [ -z "$(chroot_host_mounts "$root")" ] && [[ $out == *"taking off $n mount(s)"* ]] \
     && [ "$(cat "$host/marker")" = "host data" ]; then
    ok "the next use takes the $n leftover mounts off (stacked, on a deleted clone, /proc), the host's files untouched"
  else
    not_ok "the sweep: left $(chroot_host_mounts "$root" | tr '\n' ' '); said: $out"
  fi
}

case_clean_refuses_while_in_use_and_then_removes() {
  local root out chroot_cmd
  root=$(new_root cleaned)
  chroot_ensure "$root" tiny tiny_install 2>/dev/null || { not_ok "chroot_ensure of a tiny root failed"; return; }
  # A command running in the root (a server of it).
  chroot_command "$root" --bind "$host" -- /bin/sleep 60
  setsid "${chroot_cmd[@]}" &
  pids+=($!)
  wait_root 10 "${pids[-1]}" "$root" || { not_ok "the command in the root did not start"; return; }
  out=$( (chroot_clean "$root") 2>&1)
  if [ -d "$root/usr/bin" ] && [[ $out == *"processes run in it"*"${pids[-1]}"* ]]; then
    ok "chroot_clean refuses while a process runs in the root, naming it"
  else
    not_ok "chroot_clean while a process runs in the root: root there: $([ -d "$root/usr/bin" ] && echo yes || echo no); said: $out"
  fi
  kill -9 "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null
  # A mount under the root in another namespace, by a process that is not in the root.
  mkdir -p "$root/held"
  # shellcheck disable=SC2016 # the inner shell expands
  setsid unshare --mount --propagation private -- /bin/bash -c \
    'mount --bind "$1" "$2" && touch "$3/held" && exec sleep 60' _ "$host" "$root/held" "$shared" &
  pids+=($!)
  wait_file 10 "$shared/held" || { not_ok "the namespace holding a mount did not start"; return; }
  out=$( (chroot_clean "$root") 2>&1)
  if [ -d "$root/usr/bin" ] && [[ $out == *"mounts remain under it"*"$root/held"* ]]; then
    ok "chroot_clean refuses while a mount remains under the root (in any namespace), naming it"
  else
    not_ok "chroot_clean with a mount left in another namespace: root there: $([ -d "$root/usr/bin" ] && echo yes || echo no); said: $out"
  fi
  kill -9 "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null
  gone_within 5 "$root" || { not_ok "the namespace's mount did not go"; return; }
  # What an older script left in the host's namespace is swept, then all is removed.
  leave_old_mounts "$root" || { not_ok "could not make the old mounts"; return; }
  out=$( (chroot_clean "$root") 2>&1)
  if [ ! -e "$root" ] && [ ! -e "$root.lock" ] && [ ! -e "$root.log" ] \
     && [ "$(cat "$host/marker")" = "host data" ] && [ "$(cat "$shared/marker")" = "host tmp data" ]; then
    ok "chroot_clean takes an older run's mounts off and removes the root, its lock and log, and no host file"
  else
    not_ok "chroot_clean: root there: $([ -e "$root" ] && echo yes || echo no); host marker: '$(cat "$host/marker" 2>&1)'; said: $out"
  fi
}

case_a_foreign_tmpdir_stays_outside() {
  local root out
  root=$(new_root tmpdir)
  out=$(TMPDIR=/nonexistent-$$ chroot_run "$root" -- /bin/bash -c 'f=$(mktemp) && echo "$TMPDIR" && rm "$f"' 2>&1)
  if [ "$out" = /tmp ]; then
    ok "with TMPDIR=/nonexistent-$$ in the caller's environment, mktemp works inside (TMPDIR=/tmp there)"
  else
    not_ok "a foreign TMPDIR: mktemp inside said '$out'"
  fi
  # The control: that TMPDIR inside breaks mktemp, as it broke ca-certificates' postinst.
  if ! chroot_run "$root" --set TMPDIR=/nonexistent-$$ -- /bin/bash -c 'mktemp' >/dev/null 2>&1; then
    ok "control: with that TMPDIR handed in on purpose (--set), mktemp inside fails"
  else
    not_ok "control: mktemp inside worked with TMPDIR=/nonexistent-$$"
  fi
  out=$(env -i PATH="$PATH" HOME=/root TMPDIR=/nonexistent-$$ http_proxy=http://proxy.invalid:1 FOO=bar \
    MYSQLLOCK_TEST_SEEN=yes bash -c '. scripts/lib/servers.sh; . scripts/lib/chroot.sh
      chroot_run "$1" --set EXTRA=1 -- /usr/bin/env' _ "$root" 2>&1 | sort | tr '\n' ' ')
  if [ "$out" = "EXTRA=1 HOME=/root LANG=C.UTF-8 MYSQLLOCK_TEST_SEEN=yes PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TMPDIR=/tmp " ]; then
    ok "the environment inside is the listed one: PATH, HOME, LANG, TMPDIR=/tmp, MYSQLLOCK_* and --set"
  else
    not_ok "the environment inside: $out"
  fi
  if (TMPDIR=/nonexistent-$$ chroot_ensure "$root" tiny tiny_install) >/dev/null 2>&1 \
     && [ "$(cat "$root/var/lib/tiny/tiny" 2>/dev/null)" = "installed tiny" ]; then
    ok "chroot_ensure builds a root (its apt-get's mktemp included) with TMPDIR=/nonexistent-$$"
  else
    not_ok "chroot_ensure with a foreign TMPDIR failed: $(tail -3 "$root.log" 2>&1)"
  fi
}

case_a_build_killed_midway_leaves_no_mount() {
  local root pid
  root=$(new_root midway)
  mkdir -p "$shared/hold"
  # shellcheck disable=SC2016 # the inner shell expands
  MYSQLLOCK_TEST_HOLD=$shared/hold setsid bash -c 'cd "$1" && me=build
    . scripts/lib/servers.sh && . scripts/lib/chroot.sh
    slow_install() { chroot_apt "$1" install slow; }
    chroot_ensure "$2" tiny slow_install' _ "$repo" "$root" >/dev/null 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_file 20 "$shared/hold/started" || { not_ok "the build to kill did not reach its install"; return; }
  kill -9 -- "-$pid"
  wait "$pid" 2>/dev/null
  if gone_within 5 "$root" && [ -z "$(chroot_host_mounts "$root")" ]; then
    ok "a chroot build killed with SIGKILL mid-install leaves no mount under the root"
  else
    not_ok "after killing a build: $(everywhere "$root" | tr '\n' ' ')"
  fi
  if (chroot_ensure "$root" tiny tiny_install) >/dev/null 2>&1 && [ -e "$root/.mysqllock-packages" ]; then
    ok "the next chroot_ensure completes the build (the lock died with the killed one)"
  else
    not_ok "the next chroot_ensure after the killed build failed: $(tail -3 "$root.log" 2>&1)"
  fi
}

case_a_command_sees_its_mounts_and_they_end_with_it
case_a_killed_command_leaves_no_mount
case_four_commands_at_once_see_the_bind
case_removing_the_cache_leaves_the_host_alone
case_an_older_runs_mounts_are_swept_by_the_next_use
case_clean_refuses_while_in_use_and_then_removes
case_a_foreign_tmpdir_stays_outside
case_a_build_killed_midway_leaves_no_mount
echo "chroot-run: $passed passed, $failed failed in $((SECONDS - started)) s"
[ "$failed" -eq 0 ]
