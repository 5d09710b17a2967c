// Command etcd runs a single-member etcd server embedded from
// go.etcd.io/etcd/server/v3, serving plain HTTP on loopback only; it is the
// storage of the test control plane and is never exposed beyond 127.0.0.1.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory holding etcd's data (required)")
	clientPort := flag.Int("client-port", 2379, "loopback port for clients (the API server)")
	peerPort := flag.Int("peer-port", 2380, "loopback port for the (unused) peer listener etcd insists on")
	noFsync := flag.Bool("unsafe-no-fsync", true, "skip fsync: the data is thrown away after the run, speed matters more")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("etcd: --data-dir is required")
	}
	if err := run(*dataDir, *clientPort, *peerPort, *noFsync); err != nil {
		log.Fatalf("etcd: %v", err)
	}
}

func loopbackURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)}
}

func run(dataDir string, clientPort, peerPort int, noFsync bool) error {
	cfg := embed.NewConfig()
	cfg.Name = "realcluster"
	cfg.Dir = dataDir
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = noFsync
	client := loopbackURL(clientPort)
	peer := loopbackURL(peerPort)
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())
	// No separate metrics listener: everything stays on the two ports above.
	cfg.ListenMetricsUrls = nil

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting embedded etcd in %s: %w", dataDir, err)
	}
	defer server.Close()

	select {
	case <-server.Server.ReadyNotify():
		log.Printf("etcd: ready on %s", client.String())
	case <-time.After(60 * time.Second):
		server.Server.Stop()
		return fmt.Errorf("not ready within 60s")
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-signals:
		log.Printf("etcd: %v received, stopping", sig)
		return nil
	case err := <-server.Err():
		return fmt.Errorf("server failed: %w", err)
	}
}
