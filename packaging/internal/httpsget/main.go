// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command httpsget is a test fixture of the package tests: the minimal base system has no curl.
// It GETs an HTTPS URL without verifying the server (self-signed, as probeshim-metrics' default)
// and prints the status code and the body's first line. It is not shipped.
//
//	httpsget URL [TOKEN]
package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: httpsget URL [TOKEN]")
		os.Exit(2)
	}
	req, err := http.NewRequest(http.MethodGet, os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(os.Args) == 3 {
		req.Header.Set("Authorization", "Bearer "+os.Args[2])
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a fixture reading a self-signed test server
	}}
	resp, err := hc.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	fmt.Printf("%d %s", resp.StatusCode, line)
}
