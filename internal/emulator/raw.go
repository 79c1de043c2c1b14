package emulator

import (
	"bytes"
	"io"
	"sort"

	"github.com/emersion/go-message/mail"
)

// composeRaw renders a stored message (sent, or delivered through the
// control API) as RFC 5322 with MIME parts, for the raw download.
func composeRaw(m *message) []byte {
	var h mail.Header
	keys := make([]string, 0, len(m.headers))
	for k := range m.headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Set(k, m.headers[k])
	}
	h.SetDate(m.timestamp)
	h.SetSubject(m.subject)
	h.Set("Message-ID", m.messageID)

	var buf bytes.Buffer
	w, err := mail.CreateWriter(&buf, h)
	if err != nil {
		return nil
	}
	if m.text != "" || m.html != "" {
		iw, err := w.CreateInline()
		if err == nil {
			writePart := func(ct, body string) {
				var ph mail.InlineHeader
				ph.SetContentType(ct, map[string]string{"charset": "utf-8"})
				if pw, err := iw.CreatePart(ph); err == nil {
					_, _ = io.WriteString(pw, body)
					_ = pw.Close()
				}
			}
			if m.text != "" {
				writePart("text/plain", m.text)
			}
			if m.html != "" {
				writePart("text/html", m.html)
			}
			_ = iw.Close()
		}
	}
	for _, a := range m.attachments {
		var ah mail.AttachmentHeader
		ah.SetContentType(orDefault(a.contentType, "application/octet-stream"), nil)
		ah.SetFilename(a.filename)
		if aw, err := w.CreateAttachment(ah); err == nil {
			_, _ = aw.Write(a.data)
			_ = aw.Close()
		}
	}
	_ = w.Close()
	return buf.Bytes()
}
