// Command etcd runs a single-member etcd on loopback for the end-to-end tests.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dir := flag.String("data-dir", "", "data directory")
	client := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()

	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.LogLevel = "warn"
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatal(err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	// Tests write little and want speed over durability.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	log.Printf("etcd ready on %s", cu)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case err := <-e.Err():
		log.Fatal(err)
	}
}
