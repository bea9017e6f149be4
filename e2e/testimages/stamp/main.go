// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command stamp writes the wall-clock time in Unix nanoseconds to the file
// it is given, unless that file exists already, and exits 0. Run as an exec
// probe it records when the probe first ran, to the nanosecond, which
// busybox date cannot (no %N).
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: stamp FILE")
		os.Exit(2)
	}
	now := time.Now().UnixNano() // first, before any file system work
	f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := f.WriteString(strconv.FormatInt(now, 10) + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
