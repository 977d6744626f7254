// pause: the sandbox container of every pod on the real-node test tier's kubelet (the dpo.dev/pause image
// that containerd is told to use). It holds the pod's namespaces by doing nothing until SIGINT or SIGTERM,
// then exits 0. As PID 1 of a pod that shares its process namespace, every orphan of the pod becomes its
// child, so it also waits for each child that exits: otherwise they would stay zombies until the pod goes.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// reapChildren collects every child that has exited. Several SIGCHLDs can arrive as one, so it loops
// until none is left rather than waiting once per signal.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children at all; 0: the others are still running
		}
	}
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: pause (takes no arguments; SIGINT or SIGTERM ends it)")
		os.Exit(2)
	}
	// The kernel drops signals to a namespace's PID 1 that it has no handler for, so SIGTERM would be
	// ignored inside the pod without this.
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Children that exited before the handler was in place sent their SIGCHLD to no one.
	reapChildren()
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reapChildren()
			continue
		}
		os.Exit(0)
	}
}
