// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command servedir is a test fixture of the package tests: it serves a folder over plain HTTP, as
// a package repository is served, inside a test's container (the minimal base system has no web
// server). It logs each request, so a test can see what apt fetched. It is not shipped.
//
//	servedir DIR ADDR
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: servedir DIR ADDR")
		os.Exit(2)
	}
	files := http.FileServer(http.Dir(os.Args[1]))
	srv := &http.Server{Addr: os.Args[2], ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			log.Printf("%s %s", r.Method, r.URL.Path)
			files.ServeHTTP(w, r)
		})}
	log.Fatal(srv.ListenAndServe())
}
