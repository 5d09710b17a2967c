// Command hotserver is the real-node tests' hot-upgrade sidecar (e2e/realcluster/node.sh
// builds it into the images e2e/hotserver:1, :2 and e2e/hotserver-empty:1).
//
//	hotserver serve  answer every HTTP request on :$HOTSERVER_PORT (8080) with
//	                 $HOTSERVER_VERSION, the listener shared with the pod's other
//	                 containers (SO_REUSEPORT), so two versions can serve together
//	hotserver idle   do nothing until SIGTERM (the empty image of a hot upgrade)
//	hotserver wait   return once this container's serve or idle is up (the postStart
//	                 hook: the kubelet reports the container running only after it)
//
// On SIGTERM, serve closes its listener and finishes the requests it has accepted. With
// net.ipv4.tcp_migrate_req=1 in the pod, connections still queued on the closed listener
// move to the other container's instead of being reset.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// upMarker exists once serve listens or idle runs: in the container's own filesystem, so
// `wait` sees only its own container.
const upMarker = "/tmp/hotserver-up"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: hotserver serve|idle|wait")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve()
	case "idle":
		err = idle()
	case "wait":
		err = wait()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hotserver:", err)
		os.Exit(1)
	}
}

func terminated() <-chan os.Signal {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	return signals
}

func serve() error {
	port := os.Getenv("HOTSERVER_PORT")
	if port == "" {
		port = "8080"
	}
	version := os.Getenv("HOTSERVER_VERSION")
	config := net.ListenConfig{Control: func(_, _ string, conn syscall.RawConn) error {
		var sockErr error
		if err := conn.Control(func(fd uintptr) {
			sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return sockErr
	}}
	listener, err := config.Listen(context.Background(), "tcp", ":"+port)
	if err != nil {
		return fmt.Errorf("listen on :%s: %w", port, err)
	}
	server := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, version)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	done := make(chan error, 1)
	go func() { done <- server.Serve(listener) }()
	if err := os.WriteFile(upMarker, nil, 0o644); err != nil {
		return err
	}
	fmt.Printf("serving version %s on :%s\n", version, port)
	select {
	case err := <-done:
		return err
	case <-terminated():
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := server.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Printf("version %s stopped\n", version)
	return nil
}

func idle() error {
	if err := os.WriteFile(upMarker, nil, 0o644); err != nil {
		return err
	}
	<-terminated()
	return nil
}

func wait() error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(upMarker); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s did not appear in 30 s", upMarker)
}
