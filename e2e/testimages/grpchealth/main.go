// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command grpc-health-server serves the standard gRPC health service
// (grpc.health.v1.Health) with a status that a test can switch while it runs.
//
//	grpc-health-server [-listen :9090] [-control 127.0.0.1:9091] [-status SERVING] [-tls]
//	grpc-health-server set [-control 127.0.0.1:9091] [-service NAME] STATUS
//
// The control endpoint (HTTP, loopback only) takes GET /set?service=NAME&status=STATUS;
// STATUS is SERVING, NOT_SERVING or UNKNOWN; a service name never set answers
// NotFound. The "set" form calls it, for `kubectl exec`.
//
// With -tls the gRPC port serves TLS only, with a self-signed certificate
// made at start (a probe must not verify it); the control endpoint stays HTTP.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "set" {
		if err := set(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	listen := flag.String("listen", ":9090", "gRPC address")
	control := flag.String("control", "127.0.0.1:9091", "HTTP control address")
	status := flag.String("status", "SERVING", "initial status of the overall service (\"\")")
	useTLS := flag.Bool("tls", false, "serve gRPC over TLS with a self-signed certificate")
	flag.Parse()

	hs := health.NewServer()
	st, ok := healthpb.HealthCheckResponse_ServingStatus_value[*status]
	if !ok {
		log.Fatalf("unknown status %q", *status)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_ServingStatus(st))

	mux := http.NewServeMux()
	mux.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		svc, s := r.URL.Query().Get("service"), r.URL.Query().Get("status")
		v, ok := healthpb.HealthCheckResponse_ServingStatus_value[s]
		if !ok {
			http.Error(w, "unknown status "+s, http.StatusBadRequest)
			return
		}
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_ServingStatus(v))
		log.Printf("service %q now %s", svc, s)
		fmt.Fprintf(w, "service %q now %s\n", svc, s)
	})
	cl, err := net.Listen("tcp", *control)
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Fatal(http.Serve(cl, mux)) }()

	gl, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	var opts []grpc.ServerOption
	if *useTLS {
		cert, err := selfSigned()
		if err != nil {
			log.Fatal(err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, hs)
	log.Printf("gRPC health on %s (status %s, TLS %v), control on %s", gl.Addr(), *status, *useTLS, cl.Addr())
	log.Fatal(srv.Serve(gl))
}

func set(args []string) error {
	fs := flag.NewFlagSet("set", flag.ExitOnError)
	control := fs.String("control", "127.0.0.1:9091", "HTTP control address")
	service := fs.String("service", "", "service name (\"\" is the server as a whole)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: grpc-health-server set [-service NAME] STATUS")
	}
	resp, err := http.Get("http://" + *control + "/set?" + url.Values{"service": {*service}, "status": {fs.Arg(0)}}.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	fmt.Print(string(body))
	return nil
}

// selfSigned is a fresh certificate that names nothing in particular: a
// probe of it checks liveness, not identity.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "grpc-health-server"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
