package agentmail

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestPublicAddr(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"8.8.8.8":                true,
		"2606:4700::1111":        true,
		"127.0.0.1":              false,
		"::1":                    false,
		"10.1.2.3":               false,
		"172.16.0.1":             false,
		"192.168.1.1":            false,
		"169.254.169.254":        false,
		"100.64.0.1":             false,
		"0.0.0.0":                false,
		"::":                     false,
		"fc00::1":                false,
		"fe80::1":                false,
		"::ffff:10.0.0.1":        false,
		"::ffff:169.254.169.254": false,
		"224.0.0.1":              false,
		"255.255.255.255":        false,
		"64:ff9b::a9fe:a9fe":     false,
		"192.0.2.1":              false,
	}
	for s, want := range cases {
		if got := publicAddr(netip.MustParseAddr(s), false); got != want {
			t.Errorf("publicAddr(%s) = %v, want %v", s, got, want)
		}
	}
	if !publicAddr(netip.MustParseAddr("127.0.0.1"), true) || publicAddr(netip.MustParseAddr("10.0.0.1"), true) {
		t.Error("loopback allowance wrong")
	}
}

// TestDownloadGuards: a production client refuses plain http and refuses
// to connect to a loopback address even over https.
func TestDownloadGuards(t *testing.T) {
	t.Parallel()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("guarded download reached the server")
	}))
	t.Cleanup(tlsSrv.Close)
	prod, err := New(Options{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = prod.DownloadAttachment(testContext(t), tlsSrv.URL+"/file", 100)
	var ne *NetworkError
	if !errors.As(err, &ne) || ne.Reason != ReasonBlockedAddress || ne.Sent {
		t.Fatalf("loopback https: %v", err)
	}
	for _, u := range []string{"http://files.example.com/x", "http://127.0.0.1/x", "ftp://x/y", "/relative", "https://user:pw@x.example/y"} {
		if _, err := prod.DownloadAttachment(testContext(t), u, 100); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// TestDownloadLoopback: an emulator-mode client fetches loopback URLs
// without credentials and does not follow redirects.
func TestDownloadLoopback(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/file", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("twelve bytes"))
	})
	c := newTestClient(t, srv, nil)
	dl, err := c.DownloadAttachment(testContext(t), srv.URL+"/file", 12)
	if err != nil || string(dl.Data) != "twelve bytes" || dl.ContentType != "text/plain" {
		t.Fatalf("download: %+v %v", dl, err)
	}
	_, req, _, _ := rec.snapshot()
	if req.Header.Get("Authorization") != "" {
		t.Fatal("credentials sent to the download URL")
	}
	if _, err := c.DownloadAttachment(testContext(t), srv.URL+"/file", 11); !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("cap: %v", err)
	}
	_, err = c.DownloadAttachment(testContext(t), srv.URL+"/redirect", 100)
	if pe := asError(t, err); pe.Status != http.StatusFound || pe.Operation != OpDownloadAttachment {
		t.Fatalf("redirect: %+v", pe)
	}
}
