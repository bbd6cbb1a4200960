#!/usr/bin/env bash
# The network shares the relay's share tests run over, on a fresh Debian machine as root:
# an SFTP server (openssh-server) and an SMB server (Samba) listening on 127.0.0.1 inside a
# network namespace of their own (nothing else on the machine can reach them, and they reach
# nothing), each mounted there with a FUSE client: sshfs for SFTP, rclone's smb backend for SMB.
#
#   scripts/shares-env.sh COMMAND...   runs COMMAND inside the namespace with the shares mounted
#                                      and JIRA_HUB_SHARES describing them, then takes it all down.
#
# JIRA_HUB_SHARES is `name=mount:server_dir:options;…`: where the share is mounted, the folder the
# server serves (the "server's disk", where a side that is not mounted works), the mount options.
# Idempotent: a namespace or servers left by an interrupted run are reused or replaced.
set -euo pipefail

NS=jira-hub-shares
BASE=/run/jira-hub-shares
SSH_PORT=2222
SMB_PORT=4445

need() { command -v "$1" >/dev/null 2>&1; }

install_tools() {
  local missing=()
  need sshfs || missing+=(sshfs)
  need /usr/sbin/sshd || missing+=(openssh-server)
  need ssh-keygen || missing+=(openssh-client)
  need /usr/sbin/smbd || missing+=(samba)
  need rclone || missing+=(rclone)
  need fusermount3 || missing+=(fuse3)
  need ip || missing+=(iproute2)
  need curl || missing+=(curl)
  need jq || missing+=(jq)
  if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  # Installing openssh-server or samba on a machine with systemd starts them on every address:
  # the tests want them only inside the namespace.
  if [ -d /run/systemd/system ]; then
    systemctl disable --now ssh.service smbd.service nmbd.service >/dev/null 2>&1 || true
  fi
}

inside() {
  # Here: the namespace (its own loopback) and a mount namespace of its own (ip netns exec).
  ip link set lo up
  mount --make-rprivate / 2>/dev/null || true
  rm -rf "$BASE"
  mkdir -p "$BASE"/{ssh,samba/private,samba/state,samba/cache,samba/lock,samba/pid,srv/sftp,srv/smb,mnt}
  chmod 755 "$BASE"
  # SFTP: a host key and a client key of this run only; root logs in by key, sftp only.
  ssh-keygen -q -t ed25519 -N '' -f "$BASE/ssh/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$BASE/ssh/client_key"
  cp "$BASE/ssh/client_key.pub" "$BASE/ssh/authorized_keys"
  cat >"$BASE/ssh/sshd_config" <<EOF
ListenAddress 127.0.0.1:$SSH_PORT
HostKey $BASE/ssh/host_key
AuthorizedKeysFile $BASE/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $BASE/ssh/sshd.pid
Subsystem sftp internal-sftp
EOF
  mkdir -p /run/sshd
  /usr/sbin/sshd -f "$BASE/ssh/sshd_config" -E "$BASE/ssh/sshd.log"
  # SMB: Samba on 127.0.0.1 only, one share, one user (the test's, root mapped), no NetBIOS.
  cat >"$BASE/samba/smb.conf" <<EOF
[global]
  interfaces = 127.0.0.1
  bind interfaces only = yes
  smb ports = $SMB_PORT
  disable netbios = yes
  server role = standalone server
  map to guest = never
  private dir = $BASE/samba/private
  state directory = $BASE/samba/state
  cache directory = $BASE/samba/cache
  lock directory = $BASE/samba/lock
  pid directory = $BASE/samba/pid
  log file = $BASE/samba/log.%m
  server min protocol = SMB2_10
  load printers = no
  printing = bsd
  printcap name = /dev/null
[relay]
  path = $BASE/srv/smb
  read only = no
  force user = root
  valid users = jirahub
EOF
  id jirahub >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin jirahub
  printf 'relay-test\nrelay-test\n' | smbpasswd -c "$BASE/samba/smb.conf" -s -a jirahub >/dev/null
  /usr/sbin/smbd -D -s "$BASE/samba/smb.conf"
  for _ in $(seq 50); do
    (exec 3<>/dev/tcp/127.0.0.1/$SMB_PORT) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/$SSH_PORT) 2>/dev/null && break
    sleep 0.2
  done
  # The mounts: sshfs with its default caches (the share as people mount it) and with the
  # README's options (twice: both sides on a mount are two clients, each with its own cache), and
  # rclone's SMB client with the README's options (twice too).
  local ssh_opts="port=$SSH_PORT,IdentityFile=$BASE/ssh/client_key,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,reconnect,ServerAliveInterval=5"
  # Each mount is made by a script of its own, `$BASE/mount-<name>.sh`, that a test runs again
  # to remount it after dropping it (`fusermount3 -u -z`).
  local pass
  pass="$(rclone obscure relay-test)"
  mount_script() {
    local name=$1
    shift
    mkdir -p "$BASE/mnt/$name"
    printf '#!/bin/bash\nset -e\n%s\nfor _ in $(seq 50); do mountpoint -q %q && exit 0; sleep 0.2; done\nexit 1\n' \
      "$(printf '%q ' "$@")" "$BASE/mnt/$name" >"$BASE/mount-$name.sh"
    chmod 700 "$BASE/mount-$name.sh"
    "$BASE/mount-$name.sh"
  }
  mount_script sftp-cached sshfs "root@127.0.0.1:$BASE/srv/sftp" "$BASE/mnt/sftp-cached" -o "$ssh_opts"
  mount_script sftp sshfs "root@127.0.0.1:$BASE/srv/sftp" "$BASE/mnt/sftp" -o "$ssh_opts,dir_cache=no"
  mount_script sftp2 sshfs "root@127.0.0.1:$BASE/srv/sftp" "$BASE/mnt/sftp2" -o "$ssh_opts,dir_cache=no"
  local m
  for m in smb smb2; do
    mount_script "$m" rclone mount ":smb:relay" "$BASE/mnt/$m" --smb-host 127.0.0.1 --smb-port "$SMB_PORT" \
      --smb-user jirahub --smb-pass "$pass" --dir-cache-time 0s --vfs-cache-mode off \
      --daemon --log-file "$BASE/rclone-$m.log"
  done
  export JIRA_HUB_SHARES="sftp-cached=$BASE/mnt/sftp-cached:$BASE/srv/sftp:sshfs default caches;sftp=$BASE/mnt/sftp:$BASE/srv/sftp:sshfs -o dir_cache=no;sftp2=$BASE/mnt/sftp2:$BASE/srv/sftp:sshfs -o dir_cache=no;smb=$BASE/mnt/smb:$BASE/srv/smb:rclone smb --dir-cache-time 0s --vfs-cache-mode off;smb2=$BASE/mnt/smb2:$BASE/srv/smb:rclone smb --dir-cache-time 0s --vfs-cache-mode off"
  local rc=0
  "$@" || rc=$?
  for m in "$BASE"/mnt/*; do fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  [ -f "$BASE/ssh/sshd.pid" ] && kill "$(cat "$BASE/ssh/sshd.pid")" 2>/dev/null || true
  [ -f "$BASE/samba/pid/smbd.pid" ] && kill "$(cat "$BASE/samba/pid/smbd.pid")" 2>/dev/null || true
  return "$rc"
}

if [ "${1:-}" = "--inside" ]; then
  shift
  inside "$@"
  exit $?
fi

[ "$(id -u)" -eq 0 ] || { echo "shares-env: needs root (a network namespace, FUSE mounts)" >&2; exit 1; }
[ -e /dev/fuse ] || { echo "shares-env: no /dev/fuse on this machine" >&2; exit 1; }
install_tools
ip netns list | grep -qw "$NS" || ip netns add "$NS"
# Whatever an earlier, interrupted run left in the namespace (its servers, its FUSE clients) goes
# first, and whatever this run leaves goes after it: only processes of this namespace.
stop_namespace() {
  local pid
  for pid in $(ip netns pids "$NS" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
}
stop_namespace
rc=0
ip netns exec "$NS" "$0" --inside "$@" || rc=$?
stop_namespace
ip netns delete "$NS" 2>/dev/null || true
exit "$rc"
