package agentmail

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func svixHeaders(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set("svix-id", id)
	h.Set("svix-timestamp", strconv.FormatInt(ts, 10))
	h.Set("svix-signature", sig)
	return h
}

func webhookReason(err error) string {
	var we *WebhookError
	if errors.As(err, &we) {
		return we.Reason
	}
	return ""
}

// TestWebhookPublishedVector checks the documented Svix test vector.
func TestWebhookPublishedVector(t *testing.T) {
	t.Parallel()
	v, err := NewWebhookVerifier(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(vectorTS, 0)
	if err := v.VerifyAt([]byte(vectorBody), svixHeaders(vectorID, vectorTS, vectorSig), at); err != nil {
		t.Fatalf("vector rejected: %v", err)
	}
	sig, err := SignWebhook(vectorSecret, vectorID, at, []byte(vectorBody))
	if err != nil || sig != vectorSig {
		t.Fatalf("SignWebhook = %q, %v", sig, err)
	}
}

// TestWebhookAgainstSvixLibrary verifies signatures produced by the
// official Svix library and compares verdicts with its Verify for the
// documented scenarios and the header rules.
func TestWebhookAgainstSvixLibrary(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + "c2VjcmV0LWtleS1mb3ItYWdlbnRtYWlsLXRlc3RzIQ=="
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewWebhookVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := svix.NewWebhook("whsec_" + "b3RoZXItc2VjcmV0LWtleS1mb3ItdGVzdHMhIQ==")

	body := []byte(`{"type":"event","event_type":"message.received","event_id":"evt_1","message":{"inbox_id":"a@agentmail.to","message_id":"<m@x>"}}`)
	now := time.Now()
	sign := func(w *svix.Webhook, id string, ts time.Time, b []byte) string {
		s, err := w.Sign(id, ts, b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := sign(wh, "msg_1", now, body)
	bad := sign(other, "msg_1", now, body)

	webhookFamily := func(h http.Header) http.Header {
		out := http.Header{}
		out.Set("webhook-id", h.Get("svix-id"))
		out.Set("webhook-timestamp", h.Get("svix-timestamp"))
		out.Set("webhook-signature", h.Get("svix-signature"))
		return out
	}

	cases := []struct {
		name   string
		body   []byte
		h      http.Header
		ok     bool
		reason string
	}{
		{"exact raw body", body, svixHeaders("msg_1", now.Unix(), good), true, ""},
		{"one trailing space", append(append([]byte{}, body...), ' '), svixHeaders("msg_1", now.Unix(), good), false, "no_matching_signature"},
		{"stale timestamp 1", body, svixHeaders("msg_1", 1, sign(wh, "msg_1", time.Unix(1, 0), body)), false, "timestamp_too_old"},
		{"ten minutes old", body, svixHeaders("msg_1", now.Add(-10*time.Minute).Unix(), sign(wh, "msg_1", now.Add(-10*time.Minute), body)), false, "timestamp_too_old"},
		{"ten minutes ahead", body, svixHeaders("msg_1", now.Add(10*time.Minute).Unix(), sign(wh, "msg_1", now.Add(10*time.Minute), body)), false, "timestamp_too_new"},
		{"four minutes old", body, svixHeaders("msg_1", now.Add(-4*time.Minute).Unix(), sign(wh, "msg_1", now.Add(-4*time.Minute), body)), true, ""},
		{"rotation: bogus then good", body, svixHeaders("msg_1", now.Unix(), bad+" "+good), true, ""},
		{"rotation: good then bogus", body, svixHeaders("msg_1", now.Unix(), good+" "+bad), true, ""},
		{"only wrong secret", body, svixHeaders("msg_1", now.Unix(), bad), false, "no_matching_signature"},
		{"v2 prefix ignored", body, svixHeaders("msg_1", now.Unix(), "v2,"+strings.TrimPrefix(good, "v1,")), false, "no_matching_signature"},
		{"different id", body, svixHeaders("msg_2", now.Unix(), good), false, "no_matching_signature"},
		{"webhook-* family", body, webhookFamily(svixHeaders("msg_1", now.Unix(), good)), true, ""},
		{"no headers", body, http.Header{}, false, "missing_headers"},
		{"non-numeric timestamp", body, func() http.Header {
			h := svixHeaders("msg_1", now.Unix(), good)
			h.Set("svix-timestamp", "soon")
			return h
		}(), false, "invalid_timestamp"},
		{"empty body", []byte{}, svixHeaders("msg_1", now.Unix(), sign(wh, "msg_1", now, []byte{})), true, ""},
	}
	for _, c := range cases {
		err := v.Verify(c.body, c.h)
		if (err == nil) != c.ok {
			t.Errorf("%s: ours err=%v, want ok=%v", c.name, err, c.ok)
		}
		if !c.ok {
			if !errors.Is(err, ErrInvalidWebhookSignature) || webhookReason(err) != c.reason {
				t.Errorf("%s: err %v, want reason %s", c.name, err, c.reason)
			}
		}
		if svixErr := wh.Verify(c.body, c.h); (svixErr == nil) != c.ok {
			t.Errorf("%s: svix library disagrees: %v", c.name, svixErr)
		}
	}
}

// TestWebhookMixedHeaderFamilies: an incomplete svix-* set falls back to
// the webhook-* family entirely, as the Svix library does.
func TestWebhookMixedHeaderFamilies(t *testing.T) {
	t.Parallel()
	wh, _ := svix.NewWebhook(vectorSecret)
	v, _ := NewWebhookVerifier(vectorSecret)
	now := time.Now()
	body := []byte(`{}`)
	sig, _ := wh.Sign("msg_w", now, body)
	h := http.Header{}
	h.Set("svix-id", "msg_other") // incomplete svix set: ignored
	h.Set("webhook-id", "msg_w")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	if err := v.Verify(body, h); err != nil {
		t.Fatalf("ours: %v", err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("svix: %v", err)
	}
}

func TestWebhookSecretErrors(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "whsec_", "whsec_not base64!!", "whsec_SECRETVALUE==="} {
		_, err := NewWebhookVerifier(s)
		if !errors.Is(err, ErrInvalidWebhookSecret) {
			t.Errorf("%q: err %v", s, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRETVALUE") {
			t.Errorf("error quotes the secret")
		}
	}
	// The prefix is optional, as in the Svix library.
	if _, err := NewWebhookVerifier(strings.TrimPrefix(vectorSecret, "whsec_")); err != nil {
		t.Fatal(err)
	}
}

// FuzzWebhookVerify compares our verdict with the Svix library's for
// arbitrary bodies, ids and signature headers (all signed or tampered with
// the same secret). Our verifier must never accept what Svix rejects.
func FuzzWebhookVerify(f *testing.F) {
	f.Add([]byte(vectorBody), "msg_1", int64(0), "", false)
	f.Add([]byte(`{"a":1}`), "msg_2", int64(-400), "v1,AAAA", true)
	f.Add([]byte{}, "", int64(10), "v1,", false)
	wh, _ := svix.NewWebhook(vectorSecret)
	v, _ := NewWebhookVerifier(vectorSecret)
	f.Fuzz(func(t *testing.T, body []byte, id string, skew int64, extraSig string, tamper bool) {
		now := time.Now()
		ts := now.Add(time.Duration(skew%1000) * time.Second)
		sig, _ := wh.Sign(id, ts, body)
		if extraSig != "" {
			sig = extraSig + " " + sig
		}
		if tamper {
			body = append(append([]byte{}, body...), 'x')
		}
		h := svixHeaders(id, ts.Unix(), sig)
		ours := v.VerifyAt(body, h, now)
		theirs := wh.Verify(body, h)
		if ours == nil && theirs != nil {
			t.Fatalf("accepted what svix rejects: %v", theirs)
		}
	})
}
