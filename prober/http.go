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
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Probes check liveness, not identity: certificates are not verified.
var probeTLS = &tls.Config{InsecureSkipVerify: true} //nolint:gosec

const maxRedirects = 10

// probeHTTP GETs the action's URL on host:port through d. A body read error
// is a probe error, as in the kubelet.
func probeHTTP(ctx context.Context, d Dialer, host string, port int, a *corev1.HTTPGetAction, timeout time.Duration) (Result, string, error) {
	req, err := newHTTPRequest(ctx, host, port, a)
	if err != nil {
		return Failure, err.Error(), nil
	}
	// A transport per probe: connections are never reused anyway, and a
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
		WriteBufferSize: 1 << 10,
		ReadBufferSize:  1 << 10,
	}
	client := &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: sameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer res.Body.Close()
	if _, err := io.CopyN(io.Discard, res.Body, MaxOutput); err != nil && err != io.EOF {
		return Unknown, "", fmt.Errorf("reading response body: %w", err)
	}
	switch {
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return Success, "Probe terminated redirects", nil
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return Success, "", nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

func newHTTPRequest(ctx context.Context, host string, port int, a *corev1.HTTPGetAction) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
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
		h.Set("User-Agent", UserAgent)
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
