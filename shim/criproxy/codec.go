// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

// frame is one gRPC message as it was on the wire, never decoded: what
// lets the proxy forward every method of every CRI version unchanged.
type frame struct{ b []byte }

// rawCodec moves frames through gRPC untouched. Its name is "proto" so that
// both sides still see the content type of a protobuf call.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(*frame).b, nil }

// Unmarshal keeps data: gRPC hands a V1 codec a slice of its own (a copy
// of its buffers), so holding on to it is safe.
func (rawCodec) Unmarshal(data []byte, v any) error {
	v.(*frame).b = data
	return nil
}

func (rawCodec) Name() string { return "proto" }
