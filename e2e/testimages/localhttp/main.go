// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command localhttp-server is an HTTP server that listens only on the pod's
// loopback, so that only a probe run inside the pod's network namespace can
// reach it.
//
//	localhttp-server [-listen 127.0.0.1:8080] [-code 200] [-h2c]
//	localhttp-server set [-listen 127.0.0.1:8080] [-h2c] CODE
//	localhttp-server -hostile header|body|drip [-listen ...] [-header-size 8388608]
//
// Every path but /set and /unless-exists/ answers with the current status
// code and a line that names the request (method, path, Host header), so a
// test can see what a probe sent. GET /set?code=N switches the code; the
// "set" form calls it. GET /unless-exists/PATH answers 500 while the file
// PATH exists in the container and 200 otherwise: a probe a test fails with
// `touch PATH`, at the cost of an HTTP request instead of an exec.
// Every answer carries the request's protocol in X-Proto.
//
// With -h2c it speaks HTTP/2 over cleartext with prior knowledge (h2c) and
// nothing else, so an HTTP/1.1 request fails: a probe that succeeds spoke
// HTTP/2. Its answer line ends with " proto=HTTP/2.0".
//
// With -hostile it is instead a server that attacks its client, for the
// node service's resource limits: it writes raw HTTP/1.1 without looking at
// the request — a response header of -header-size bytes, a body that never
// ends, or a header dripped one byte every 100 ms.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "set" {
		if err := set(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	listen := flag.String("listen", "127.0.0.1:8080", "address; keep it on loopback")
	code := flag.Int("code", http.StatusOK, "initial status code")
	hostile := flag.String("hostile", "", "header, body or drip: attack the client instead")
	headerSize := flag.Int("header-size", 8<<20, "size of the -hostile header response header")
	h2c := flag.Bool("h2c", false, "speak HTTP/2 over cleartext (prior knowledge) only")
	flag.Parse()
	if *hostile != "" {
		log.Fatal(serveHostile(*listen, *hostile, *headerSize))
	}
	var current atomic.Int64
	current.Store(int64(*code))

	mux := http.NewServeMux()
	mux.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil || n < 100 || n > 599 {
			http.Error(w, "code must be 100-599", http.StatusBadRequest)
			return
		}
		current.Store(int64(n))
		log.Printf("code now %d", n)
		fmt.Fprintf(w, "code now %d\n", n)
	})
	mux.HandleFunc("/unless-exists/", func(w http.ResponseWriter, r *http.Request) {
		file := strings.TrimPrefix(r.URL.Path, "/unless-exists")
		_, err := os.Stat(file)
		switch {
		case err == nil:
			http.Error(w, file+" exists", http.StatusInternalServerError)
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(w, "no %s\n", file)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("redirect to %q", r.URL.Query().Get("to"))
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c := int(current.Load())
		proto := ""
		if *h2c {
			proto = " proto=" + r.Proto
		}
		log.Printf("%s %s host=%q ua=%q -> %d%s", r.Method, r.URL.Path, r.Host, r.UserAgent(), c, proto)
		w.WriteHeader(c)
		fmt.Fprintf(w, "%d %s %s host=%s%s\n", c, r.Method, r.URL.Path, r.Host, proto)
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
		mux.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: time.Minute}
	if *h2c {
		srv.Protocols = h2cOnly()
	}
	log.Printf("listening on %s, answering %d, h2c %v", ln.Addr(), *code, *h2c)
	log.Fatal(srv.Serve(ln))
}

// h2cOnly is HTTP/2 over cleartext with prior knowledge, and nothing else.
func h2cOnly() *http.Protocols {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return p
}

func set(args []string) error {
	fs := flag.NewFlagSet("set", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "the server's address")
	h2c := fs.Bool("h2c", false, "the server speaks h2c only")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: localhttp-server set [-h2c] CODE")
	}
	client := http.DefaultClient
	if *h2c {
		client = &http.Client{Transport: &http.Transport{Protocols: h2cOnly()}}
	}
	resp, err := client.Get("http://" + *listen + "/set?code=" + fs.Arg(0))
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

func serveHostile(listen, kind string, headerSize int) error {
	var respond func(c net.Conn)
	switch kind {
	case "header":
		resp := []byte("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("h", headerSize) + "\r\nContent-Length: 0\r\n\r\n")
		respond = func(c net.Conn) { _, _ = c.Write(resp) }
	case "body":
		chunk := []byte(strings.Repeat("b", 64<<10))
		respond = func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}
	case "drip":
		respond = func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nX-Drip: "))
			for {
				if _, err := c.Write([]byte("d")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	default:
		return fmt.Errorf("-hostile %q: want header, body or drip", kind)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	log.Printf("listening on %s, hostile: %s", ln.Addr(), kind)
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			_, _ = bufio.NewReader(c).ReadString('\n')
			respond(c)
		}()
	}
}
