package agentmail

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/paperclipai/paperclipai/internal/netguard"
)

// ReasonBlockedAddress is the [NetworkError.Reason] of a download refused
// because its host resolved to a private, loopback, link-local or otherwise
// non-public address.
const ReasonBlockedAddress = "blocked_address"

var errBlockedAddress = netguard.ErrBlocked

// AttachmentDownload is the content of a downloaded attachment.
type AttachmentDownload struct {
	// Data holds the attachment bytes.
	Data []byte
	// ContentType is the Content-Type the storage server reported, if any.
	ContentType string
}

// DownloadAttachment fetches the bytes behind an attachment locator's
// pre-signed DownloadURL, reading at most maxBytes (a non-positive maxBytes
// means [MaxResponseBytes]). A larger attachment fails with
// [ErrResponseTooLarge] without being read.
//
// The URL is provider-controlled, so the fetch is guarded against SSRF: it
// must be https; no Authorization header is sent; redirects are refused; no
// proxy is used; and the connection is refused when the host resolves to a
// non-public address (checked on the resolved IP at connect time, which also
// defeats DNS rebinding). Only when the client's own API base URL is a
// loopback address (the local emulator) are plain http and loopback
// destinations allowed. Errors never quote the URL, which is a bearer
// capability.
func (c *Client) DownloadAttachment(ctx context.Context, downloadURL string, maxBytes int64) (*AttachmentDownload, error) {
	const op = OpDownloadAttachment
	if maxBytes <= 0 {
		maxBytes = MaxResponseBytes
	}
	u, err := url.Parse(downloadURL)
	if err != nil || u.Host == "" || u.User != nil {
		return nil, &ArgumentError{Operation: op, Reason: "download URL is not an absolute URL"}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && c.loopback && isLoopbackHost(u.Hostname()):
	default:
		return nil, &ArgumentError{Operation: op, Reason: "download URL must use https"}
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, gotConn := traceConn(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &ArgumentError{Operation: op, Reason: "download request could not be built"}
	}
	resp, err := c.download.Do(req)
	if err != nil {
		ne := newNetworkError(op, err, gotConn.Load())
		if errors.Is(err, errBlockedAddress) {
			ne.Reason = ReasonBlockedAddress
		}
		return nil, ne
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &Error{
			Status:     resp.StatusCode,
			Operation:  op,
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
			Code:       inspectErrorBody(resp.Body, resp.ContentLength),
		}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.ContentLength > maxBytes {
		return nil, &ResponseError{Operation: op, Status: resp.StatusCode, Detail: "too_large", kind: ErrResponseTooLarge}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, newNetworkError(op, err, true)
	}
	if int64(len(data)) > maxBytes {
		return nil, &ResponseError{Operation: op, Status: resp.StatusCode, Detail: "too_large", kind: ErrResponseTooLarge}
	}
	return &AttachmentDownload{Data: data, ContentType: resp.Header.Get("Content-Type")}, nil
}

// newDownloadClient builds the SSRF-guarded client for pre-signed URLs.
// allowLoopback is set when the API itself is on loopback (the emulator).
func newDownloadClient(allowLoopback bool) *http.Client {
	return &http.Client{Transport: netguard.Transport(allowLoopback), CheckRedirect: refuseRedirect}
}

// publicAddr reports whether a is an acceptable download destination
// (netguard.PublicAddr).
func publicAddr(a netip.Addr, allowLoopback bool) bool { return netguard.PublicAddr(a, allowLoopback) }

// isLoopbackHost reports whether host is "localhost" or a loopback IP
// literal (netguard.IsLoopbackHost).
func isLoopbackHost(host string) bool { return netguard.IsLoopbackHost(host) }
