package emulator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"

	gomessage "github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode non-UTF-8 charsets
	"github.com/emersion/go-message/mail"
)

// Ingestion bounds for raw RFC 5322 messages.
const (
	maxMIMEParts     = 256
	maxPartBytes     = 25 << 20
	maxHeaderEntries = 1000
)

// inboundMail is a received message before it is stored, produced either by
// parsing raw RFC 5322 (SMTP) or from a deliver control request.
type inboundMail struct {
	from        string
	to, cc      []string
	replyTo     []string
	subject     string
	text, html  string
	headers     map[string]string
	messageID   string
	inReplyTo   string
	references  []string
	date        time.Time
	attachments []*attachment
	raw         []byte
	labels      []string
}

var wordDecoder = &mime.WordDecoder{CharsetReader: gomessage.CharsetReader}

func decodeWords(s string) string {
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// formatAddr renders an address as "Name <addr>" or "addr".
func formatAddr(a *mail.Address) string {
	return formatNameAddr(a.Name, a.Address)
}

// formatNameAddr renders "Name <addr>", quoting the name only when it
// contains characters that are special in an address header.
func formatNameAddr(name, addr string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		return addr
	}
	if strings.ContainsAny(name, "()<>[]:;@\\,.\"") || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		q := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name)
		return `"` + q + `" <` + addr + ">"
	}
	return name + " <" + addr + ">"
}

func addressList(h *mail.Header, key string) []string {
	if list, err := h.AddressList(key); err == nil {
		out := make([]string, 0, len(list))
		for _, a := range list {
			out = append(out, formatAddr(a))
		}
		return out
	}
	raw := strings.TrimSpace(decodeWords(h.Get(key)))
	if raw == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(raw, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func msgIDList(h *mail.Header, key string) []string {
	ids, err := h.MsgIDList(key)
	if err != nil || len(ids) == 0 {
		var out []string
		for _, f := range strings.Fields(h.Get(key)) {
			if id := normalizeMsgID(f); id != "" {
				out = append(out, id)
			}
		}
		return out
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, normalizeMsgID(id))
	}
	return out
}

// parseMIME parses a raw RFC 5322 message with MIME parts. It is tolerant:
// unknown charsets, malformed address headers and broken trailing parts
// keep whatever could be read. It returns an error only when not even the
// header can be read.
func parseMIME(raw []byte) (*inboundMail, error) {
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if mr == nil {
		return nil, fmt.Errorf("parse message header: %w", err)
	}
	defer mr.Close()
	h := &mr.Header
	in := &inboundMail{raw: raw, headers: map[string]string{}}

	fields := h.Fields()
	for n := 0; fields.Next() && n < maxHeaderEntries; n++ {
		k := fields.Key()
		if _, dup := in.headers[k]; dup {
			continue // multi-valued headers keep their first value
		}
		v, ferr := fields.Text()
		if ferr != nil {
			v = fields.Value()
		}
		in.headers[k] = v
	}

	if from := addressList(h, "From"); len(from) > 0 {
		in.from = from[0]
	}
	in.to = addressList(h, "To")
	in.cc = addressList(h, "Cc")
	in.replyTo = addressList(h, "Reply-To")
	if subj, serr := h.Subject(); serr == nil {
		in.subject = subj
	} else {
		in.subject = h.Get("Subject")
	}
	if id, ierr := h.MessageID(); ierr == nil && id != "" {
		in.messageID = normalizeMsgID(id)
	} else if f := strings.Fields(h.Get("Message-Id")); len(f) > 0 {
		in.messageID = normalizeMsgID(f[0])
	}
	if irt := msgIDList(h, "In-Reply-To"); len(irt) > 0 {
		in.inReplyTo = irt[0]
	}
	in.references = msgIDList(h, "References")
	if d, derr := h.Date(); derr == nil && !d.IsZero() && d.Year() > 1900 && d.Year() < 10000 {
		in.date = d.UTC()
	}

	for n := 0; n < maxMIMEParts; n++ {
		p, perr := mr.NextPart()
		if errors.Is(perr, io.EOF) {
			break
		}
		if perr != nil && (p == nil || !gomessage.IsUnknownCharset(perr)) {
			break // keep what was read before the broken part
		}
		body, rerr := io.ReadAll(io.LimitReader(p.Body, maxPartBytes))
		if rerr != nil && len(body) == 0 {
			continue
		}
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := ph.ContentType()
			switch {
			case ct == "text/plain" || (ct == "" && in.text == ""):
				if in.text == "" {
					in.text = string(body)
					continue
				}
			case ct == "text/html":
				if in.html == "" {
					in.html = string(body)
					continue
				}
			}
			if strings.HasPrefix(ct, "text/") && !hasFilename(ph.Header) {
				continue // further text alternatives are not attachments
			}
			in.attachments = append(in.attachments, partAttachment(ph.Header, ct, "inline", body))
		case *mail.AttachmentHeader:
			ct, _, _ := ph.ContentType()
			in.attachments = append(in.attachments, partAttachment(ph.Header, ct, "attachment", body))
		}
	}
	return in, nil
}

func hasFilename(h gomessage.Header) bool {
	_, dp, _ := h.ContentDisposition()
	if dp["filename"] != "" {
		return true
	}
	_, cp, _ := h.ContentType()
	return cp["name"] != ""
}

func partAttachment(h gomessage.Header, ct, disposition string, body []byte) *attachment {
	a := &attachment{id: "att_" + randomAlnum(20), contentType: ct, disposition: disposition, data: body}
	if d, dp, err := h.ContentDisposition(); err == nil {
		if d == "inline" || d == "attachment" {
			a.disposition = d
		}
		a.filename = dp["filename"]
	}
	if a.filename == "" {
		_, cp, _ := h.ContentType()
		a.filename = cp["name"]
	}
	a.filename = decodeWords(a.filename)
	if cid := strings.TrimSpace(h.Get("Content-Id")); cid != "" {
		a.contentID = strings.Trim(cid, "<>")
	}
	return a
}
