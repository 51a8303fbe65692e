# CUDA IPC across confinements (run on a GPU machine as root, from the repository root):
#   bash benchmarks/ipc_probe.sh
# The exporter (the candidate's side) runs under one confinement per line, the importer (the
# reference's side) as root or as the sandbox uid; each line says whether the import worked.
# The last confinements rebuild kbench's sandbox step by step (src/sandbox.rs).
set -u
dir=/tmp/ipc-probe; rm -rf $dir; mkdir -p $dir; chmod 777 $dir
cp benchmarks/ipc_probe.py $dir/
p=$dir/ipc_probe.py
py=$(python3 -c 'import sys; print(sys.executable)')
prefix=$(python3 -c 'import sys; print(sys.prefix)')
nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
dropped="$nobody --inh-caps=-all --bounding-set=-all --no-new-privs"
ns="unshare --pid --fork --kill-child --mount --net --ipc --uts --propagation private"
# kbench's private root, then the command: $1 = how far (root, limits), $2 = its /dev/shm
# (private: a tmpfs of its own, as kbench; else a host folder bound there)
jail() { how=$1 shm=$2; shift 2; cat <<SH
set -e
R=/tmp/ipc-jail; mkdir -p \$R
b() { mkdir -p "\$R\$2"; mount --rbind "\$1" "\$R\$2"; o=\$(findmnt -no VFS-OPTIONS "\$R\$2" | sed 's/^rw/ro/'); mount -o "remount,bind,\$o,nosuid,nodev" "\$R\$2"; }
d() { touch "\$R\$1"; mount --bind "\$1" "\$R\$1"; }
mount -t tmpfs -o mode=0755,size=16m kbench-root "\$R"
mkdir -p "\$R/tmp" "\$R/dev/shm" "\$R/proc" "\$R/probe"
for s in /usr /etc /bin /sbin /lib /lib64 /opt /sys; do
  if [ -L \$s ]; then ln -s "\$(readlink \$s)" "\$R\$s"; elif [ -d \$s ]; then b \$s \$s; fi
done
case "$prefix" in /usr|/usr/*|/opt/*) ;; *) b "$prefix" "$prefix" ;; esac
for f in /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty /dev/nvidia*; do
  [ -e \$f ] && [ ! -d \$f ] && d \$f
done
mount -t tmpfs -o mode=1777,nosuid,nodev kbench-tmp "\$R/tmp"
if [ $shm = private ]; then mount -t tmpfs -o mode=1777,nosuid,nodev kbench-shm "\$R/dev/shm"; else mount --bind $shm "\$R/dev/shm"; fi
mount -t proc -o nosuid,nodev,noexec proc "\$R/proc"
mkdir -p "\$R$dir"; mount --rbind $dir "\$R$dir"
cd "\$R"; pivot_root . .; umount -l .; cd /tmp
SH
if [ "$how" = limits ]; then echo "exec prlimit --nofile=4096 --nproc=16384 --fsize=68719476736 -- $dropped -- \"\$@\""
else echo "exec $dropped -- \"\$@\""; fi
}
# try NAME IMPORTER EXPORTER-PREFIX...: export under the prefix, import with IMPORTER's rights
# (root, nobody, nondump: nobody and not dumpable, shm-root and shm-nobody: with $shmdir as /dev/shm)
shmdir=/tmp/ipc-shm; mkdir -p $shmdir; chown 65534:65534 $shmdir; chmod 0700 $shmdir
withshm=$dir/withshm
printf '#!/bin/sh\nexec unshare --mount --propagation private sh -c %s withshm "$@"\n' \
  "'mount --bind $shmdir /dev/shm && exec \"\$@\"'" > $withshm; chmod +x $withshm
try() { name=$1 importer=$2; shift 2; f=$dir/h-$name; rm -f $f
  case $importer in root|euid) imp="" ;; nobody|nondump) imp=$nobody ;; shm-root) imp=$withshm ;;
    shm-nobody) imp="$withshm $nobody" ;; esac
  rm -f /dev/shm/cuda.shm.* $shmdir/*
  ( "$@" $py $p export $f > $dir/export-$name.log 2>&1 & )
  if [ $importer = nondump ]; then export KBENCH_PROBE_NONDUMP=1; fi
  if [ $importer = euid ]; then export KBENCH_PROBE_EUID=65534; fi
  timeout 60 $imp $py $p import $f 2>&1 | tail -2 | sed "s/^/$name: /"; unset KBENCH_PROBE_NONDUMP KBENCH_PROBE_EUID
  if [ $name = uid-both ]; then
    echo "  /dev/shm and the exporter's open files while it exports:"
    ls -la /dev/shm /proc/$(pgrep -f "$p export $f" | tail -1)/fd 2>&1 | sed 's/^/    /'
  fi
  grep -v "^exporter pid" $dir/export-$name.log | tail -3 | sed "s/^/  exporter: /"
  pkill -f "$p export $f"; sleep 1; }
# Each try starts with no cuda.shm.* file in /dev/shm or $shmdir.
try plain            root
try uid-root-imp     root    $nobody
try uid-euid-imp     euid    $nobody
try uid-both         nobody  $nobody
try uid-both-nondump nondump $nobody
try caps-both        nobody  $dropped
try ns-both          nobody  $ns --mount-proc $dropped
try jail-both        nobody  $ns sh -c "$(jail limits private)" jail
try jail-hostshm-both nobody $ns sh -c "$(jail limits /dev/shm)" jail
try jail-hostshm-euid euid   $ns sh -c "$(jail limits /dev/shm)" jail
try jail-dirshm-both shm-nobody $ns sh -c "$(jail limits $shmdir)" jail
try uid-dirshm-both  shm-nobody $withshm $nobody
wait
