# CUDA IPC across confinements (run on a GPU machine as root, from the repository root):
#   bash benchmarks/ipc_probe.sh
# Runs each confinement of the exporter, with the importer unconfined (or joined to its PID namespace).
p=benchmarks/ipc_probe.py
try() { name=$1; shift; f=/tmp/ipc-$name; rm -f $f
  ( "$@" python3 $p export $f & ) ; timeout 30 python3 $p import $f | sed "s/^/$name: /"; pkill -f "$p export $f"; sleep 1; }
try plain
try pidns unshare --pid --fork --mount-proc
try ipcns unshare --ipc
try mountns unshare --mount
try uid setpriv --reuid 65534 --regid 65534 --clear-groups
try netns unshare --net
# importer joins the exporter's PID namespace
f=/tmp/ipc-join; rm -f $f
unshare --pid --fork --mount-proc python3 $p export $f & sleep 0.5
for i in $(seq 60); do [ -e $f ] && break; sleep 0.2; done
child=$(pgrep -f "python3 $p export $f" | tail -1)
timeout 30 nsenter -t $child -p python3 $p import $f | sed "s/^/joinpid: /"
pkill -f "$p export"; wait
