#!/usr/bin/env bash
# server: own (a Galera cluster of MariaDB 11.8 of its own)
# 70-galera's proof, every step of it, on a 3-node cluster of MariaDB 11.8 LTS with Debian
# sid's galera-4 (scripts/galera11.sh: the nodes run in the chroot of scripts/sid.sh, and
# so do their rsync SST and --wsrep-recover), beside 70-galera's MariaDB 10.11. Same
# environment as 70-galera.sh; needs root (the chroot).
exec bash "$(dirname "$0")/70-galera.sh" mariadb11
