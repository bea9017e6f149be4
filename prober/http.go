// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Probes check liveness, not identity: certificates are not verified.
var probeTLS = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // like the kubelet: HTTPS probes check liveness, not identity

const maxRedirects = 10

// MaxResponseHeader caps the response headers a probe reads, so a target
// cannot make the node service buffer megabytes (net/http's default is
// 10 MiB); 32 KiB is what common servers accept in a request's headers.
const MaxResponseHeader = 32 << 10

// probeHTTP GETs the action's URL on addr through d and maps the answer to
// a result. A body read error is a probe error, as in the kubelet.
func probeHTTP(ctx context.Context, d Dialer, addr string, a *corev1.HTTPGetAction, timeout time.Duration) (Result, string, error) {
	code, err := HTTPGet(ctx, d, addr, a, UserAgent, timeout)
	var body *bodyError
	switch {
	case errors.As(err, &body):
		return Unknown, "", err
	case err != nil:
		return Failure, err.Error(), nil
	case code >= 300 && code < 400:
		return Success, "Probe terminated redirects", nil
	case code >= 200 && code < 300:
		return Success, "", nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", code), nil
}

// bodyError is a failure to read the response after the status arrived.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading response body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// HTTPGet sends the GET of a to addr through d as an httpGet probe does:
// the action's headers (userAgent and Accept */* unless set), no proxy, no
// keep-alive or compression, TLS unverified, same-host redirects only, the
// body read up to MaxOutput; HTTP/2 over cleartext with prior knowledge (h2c)
// when the action's protocol is HTTP2, as the kubelet's H2CContainerProbe.
// It returns the status code. The preStop hooks of the node service use it
// too (their validation refuses protocol HTTP2).
func HTTPGet(ctx context.Context, d Dialer, addr string, a *corev1.HTTPGetAction, userAgent string, timeout time.Duration) (int, error) {
	req, err := newHTTPRequest(ctx, addr, a, userAgent)
	if err != nil {
		return 0, err
	}
	// A transport per request: connections are never reused anyway, and a
	// shared transport could hand a connection dialed in one pod's network
	// namespace to a probe of another pod with the same address.
	tr := &http.Transport{
		DialContext:        lingerDial(d),
		TLSClientConfig:    probeTLS,
		DisableKeepAlives:  true,
		DisableCompression: true,
		Proxy:              nil, // never the environment's proxy
		// One small request and a response read to at most 10 KiB: the
		// default 4 KiB buffers each way are most of a probe's garbage.
		WriteBufferSize:        1 << 10,
		ReadBufferSize:         1 << 10,
		MaxResponseHeaderBytes: MaxResponseHeader,
	}
	h2c := isH2C(a)
	if h2c {
		useH2C(tr)
	}
	client := &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: sameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		if h2c && !dialOrTimeout(err) {
			return 0, &h2cError{err}
		}
		return 0, err
	}
	defer res.Body.Close()
	if _, err := io.CopyN(io.Discard, res.Body, MaxOutput); err != nil && !errors.Is(err, io.EOF) {
		return res.StatusCode, &bodyError{err}
	}
	return res.StatusCode, nil
}

func newHTTPRequest(ctx context.Context, addr string, a *corev1.HTTPGetAction, userAgent string) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = addr
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	h := make(http.Header, len(a.HTTPHeaders)+2)
	for _, hh := range a.HTTPHeaders {
		h.Add(hh.Name, hh.Value)
	}
	// Present but empty means "send none": net/http omits an empty
	// User-Agent; an empty Accept is removed here.
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", userAgent)
	}
	if v, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if len(v) == 0 || v[0] == "" {
		h.Del("Accept")
	}
	req.Header = h
	req.Host = h.Get("Host")
	return req, nil
}

// sameHostRedirects follows redirects to the same host name only; another
// host's response is returned as is and counts as success.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// isH2C reports whether a asks for HTTP/2 over cleartext (h2c). Admission
// refuses HTTP2 with scheme HTTPS, as the kubelet does.
func isH2C(a *corev1.HTTPGetAction) bool {
	return a.Protocol != nil && *a.Protocol == corev1.HTTPProtocolHTTP2
}

// useH2C makes tr speak h2c with prior knowledge and nothing else, as the
// kubelet's h2c transport: a server that only speaks HTTP/1.1 fails the probe
// rather than being probed over another protocol than asked. The dialer, the
// header cap (MaxHeaderListSize) and the client timeout stay those of
// HTTP/1.1; the flow-control windows and frame size are cut from the
// defaults (4 MiB a stream, 1 GiB a connection, 1 MiB frames) so a target
// cannot make the node service buffer more than the probe reads.
func useH2C(tr *http.Transport) {
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	tr.HTTP2 = &http.HTTP2Config{
		MaxReadFrameSize:              16 << 10, // HTTP/2's minimum
		MaxReceiveBufferPerStream:     MaxOutput,
		MaxReceiveBufferPerConnection: 64 << 10, // HTTP/2's minimum window, about
	}
}

// h2cError is a failed h2c exchange, with its likely cause: a server that
// does not speak h2c, whose HTTP/1.1 answer reads as a broken HTTP/2 frame.
type h2cError struct{ err error }

func (e *h2cError) Error() string {
	return "HTTP/2 over cleartext (h2c, prior knowledge) failed; does the server speak h2c? (protocol HTTP2): " + e.err.Error()
}
func (e *h2cError) Unwrap() error { return e.err }

// dialOrTimeout reports errors that say nothing about the protocol spoken.
func dialOrTimeout(err error) bool {
	var op *net.OpError
	var to interface{ Timeout() bool }
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &to) && to.Timeout()
}
